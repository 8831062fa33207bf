"""arXiv's metadata: the OAI snapshot's JSON lines (`id`, `title`, `abstract`, `authors`, `categories`,
`update_date`, `versions`) and the API's Atom feed (read with the standard library's XML parser, which resolves no
external entity). A paper's id is its arXiv id without version, from either source, so both give the same id."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree

from rag_bot.reading import identity
from rag_bot.reading.fields import add_entry, as_list, plain, year
from rag_bot.reading.files import ReadResult
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS
from rag_bot.types import Problem

_ATOM = "{http://www.w3.org/2005/Atom}"
_ARXIV = "{http://arxiv.org/schemas/atom}"


def is_arxiv_record(record: dict[str, object]) -> bool:
    """A record of arXiv's OAI snapshot."""
    return "categories" in record and any(k in record for k in ("update_date", "versions", "authors_parsed"))


def _authors(record: dict[str, object]) -> list[str]:
    parsed = record.get("authors_parsed")
    if isinstance(parsed, list) and parsed:
        return [" ".join(plain(x) for x in (p[1], p[0], *p[2:]) if plain(x))
                for p in parsed if isinstance(p, list) and len(p) >= 2]
    text = plain(record.get("authors")).replace(" and ", ", ")
    return [a.strip() for a in text.split(",") if a.strip()]


def from_arxiv_record(record: dict[str, object]) -> dict[str, object]:
    """An OAI snapshot record as a corpus record (year: the first version's, else the last update's)."""
    arxiv = identity.arxiv_id(record.get("id")) or plain(record.get("id"))
    versions = as_list(record.get("versions"))
    first = versions[0].get("created") if versions and isinstance(versions[0], dict) else None
    return {
        "id": arxiv,
        "title": plain(record.get("title")),
        "abstract": plain(record.get("abstract")),
        "authors": _authors(record),
        "venue": plain(record.get("journal-ref")) or None,
        "year": year(first) or year(record.get("update_date")),
        "url": f"https://arxiv.org/abs/{arxiv}" if arxiv else None,
        "identifiers": {"arxiv": arxiv, "doi": plain(record.get("doi"))},
    }


def read_atom(path: Path, text: str, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """The entries of an arXiv API response (Atom XML), as papers."""
    result = ReadResult(files=1)
    try:
        root = ElementTree.fromstring(text.lstrip("\ufeff"))
    except ElementTree.ParseError as exc:
        result.problems.append(Problem(path=str(path), line=exc.position[0] or None,
                                       message=f"not well-formed XML ({exc}); skipped"))
        return result
    entries = root.findall(f"{_ATOM}entry")
    if root.tag != f"{_ATOM}feed":
        result.problems.append(Problem(path=str(path), message="not an Atom feed (arXiv's API answers with one)"))
        return result
    seen: set[str] = set()
    for n, entry in enumerate(entries, start=1):
        def get(tag: str, entry: ElementTree.Element = entry) -> str:
            return plain(entry.findtext(tag))

        arxiv = identity.arxiv_id(get(f"{_ATOM}id")) or ""
        link = next((a.get("href") for a in entry.findall(f"{_ATOM}link")
                     if a.get("rel") == "alternate" and a.get("href")), None)
        record: dict[str, object] = {
            "id": arxiv or get(f"{_ATOM}id"),
            "title": get(f"{_ATOM}title"),
            "abstract": get(f"{_ATOM}summary"),
            "authors": [plain(a.findtext(f"{_ATOM}name")) for a in entry.findall(f"{_ATOM}author")],
            "venue": get(f"{_ARXIV}journal_ref") or None,
            "year": year(get(f"{_ATOM}published")),
            "url": (f"https://arxiv.org/abs/{arxiv}" if arxiv else None) or link,
            "identifiers": {"arxiv": arxiv, "doi": get(f"{_ARXIV}doi")},
        }
        label = f"entry {n} ({str(record['title'])[:60] or 'untitled'})"
        add_entry(record, path, 0, label, seen, result, max_chars)
    if not entries:
        result.problems.append(Problem(path=str(path), message="no entries in the feed"))
    return result
