"""CSL-JSON items (Zotero's, Pandoc's and citeproc's format, and rag-bot's own `--cite csl` export)."""

from __future__ import annotations

from rag_bot.reading.fields import as_list, identifiers_with_note, note_id, person, plain, year
from rag_bot.reading.fields import doi as fields_doi

_FIELDS = ("issued", "container-title", "DOI", "URL", "citation-key")


def is_csl(item: dict[str, object]) -> bool:
    """A CSL-JSON item: a `type` with CSL's fields, or authors as {family, given} objects."""
    authors = item.get("author")
    named = isinstance(authors, list) and bool(authors) and all(
        isinstance(a, dict) and ({"family", "given", "literal"} & a.keys()) for a in authors)
    return named or ("type" in item and any(k in item for k in _FIELDS))


def _name(author: dict[str, object]) -> str:
    if author.get("literal"):
        return plain(author["literal"])
    given, family = plain(author.get("given")), plain(author.get("family"))
    particles = (plain(author.get("dropping-particle")), plain(author.get("non-dropping-particle")))
    return " ".join(x for x in (given, *particles, family) if x)


def from_csl(item: dict[str, object]) -> dict[str, object]:
    """A CSL-JSON item as a corpus record."""
    authors = [_name(a) if isinstance(a, dict) else person(plain(a)) for a in as_list(item.get("author"))]
    issued = item.get("issued") or {}
    doi = fields_doi(item.get("DOI"))
    return {
        "id": note_id(item.get("note")) or doi or plain(item.get("id")),
        "title": plain(item.get("title"), "html"),
        "abstract": plain(item.get("abstract"), "html"),
        "authors": [a for a in authors if a],
        "venue": plain(item.get("container-title"), "html") or None,
        "year": year(issued.get("date-parts") or issued.get("raw") if isinstance(issued, dict) else issued),
        "url": plain(item.get("URL")) or (f"https://doi.org/{doi}" if doi else None),
        "identifiers": identifiers_with_note(
            item.get("note"), doi=doi, arxiv=plain(item.get("URL")) if "arxiv.org" in str(item.get("URL")) else ""),
    }
