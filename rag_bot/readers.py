"""Reference-manager files: BibTeX (`.bib`) and RIS (`.ris`), as Zotero, Mendeley and JabRef export them.

Each entry becomes the record a JSONL line would be (`id`, `title`, `abstract`, `authors`, `venue`, `year`, `url`)
and goes through the same checks (rag_bot/corpus.py `add_record`): an entry without an abstract is reported with
its line and key and skipped, never a traceback. Parsing is the well-kept libraries' (bibtexparser, rispy). The id
is the entry's DOI, else its citation key (BibTeX) or its `ID` field (RIS), else its position in the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rag_bot.corpus import DEFAULT_MAX_ABSTRACT_CHARS, Problem, ReadResult, add_record, by_line

_BRACES = re.compile(r"[{}]")


def _plain(value: Any) -> str:
    """A field's text without BibTeX's protecting braces (other LaTeX is cleaned as the seeds' is, when shown)."""
    return " ".join(_BRACES.sub("", str(value or "")).split())


def _doi_url(doi: str) -> str | None:
    return f"https://doi.org/{doi}" if doi else None


def read_bibtex_file(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """The entries of a BibTeX file that hold an abstract, as papers; the others reported by line and key."""
    import bibtexparser
    from bibtexparser import middlewares

    text = path.read_text(encoding="utf-8", errors="replace")
    library = bibtexparser.parse_string(text, append_middleware=[middlewares.SeparateCoAuthors()])
    result = ReadResult(files=1)
    seen: set[str] = set()
    for block in library.failed_blocks:
        result.problems.append(Problem(path=str(path), line=(block.start_line or 0) + 1,
                                       message="not a BibTeX entry this reader can parse; skipped"))
    for entry in library.entries:
        fields = {f.key.lower(): f.value for f in entry.fields}
        doi = _plain(fields.get("doi"))
        authors = fields.get("author") or []
        record: dict[str, object] = {
            "id": doi or entry.key,
            "title": _plain(fields.get("title")),
            "abstract": _plain(fields.get("abstract")),
            "authors": [_plain(a) for a in (authors if isinstance(authors, list) else [authors])],
            "venue": _plain(fields.get("journal") or fields.get("booktitle")) or None,
            "year": _plain(fields.get("year")) or None,
            "url": _plain(fields.get("url")) or _doi_url(doi),
        }
        if not record["abstract"]:
            del record["abstract"]  # reported as a missing field, like a JSONL record's
        before = len(result.problems)
        add_record(record, path, (entry.start_line or 0) + 1, seen, result, max_chars)
        for problem in result.problems[before:]:  # name the entry: a line alone is hard to find in a .bib
            problem.message = f"entry {entry.key!r}: {problem.message}"
    if not library.entries and not result.problems:
        result.problems.append(Problem(path=str(path), message="no BibTeX entries"))
    return by_line(result)


def read_ris_file(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """The records of a RIS file that hold an abstract, as papers; the others reported by their position."""
    import rispy

    result = ReadResult(files=1)
    seen: set[str] = set()
    try:
        entries = rispy.loads(path.read_text(encoding="utf-8-sig", errors="replace"))
    except Exception as exc:  # rispy raises bare errors on a malformed file
        result.problems.append(Problem(path=str(path), message=f"not a RIS file this reader can parse ({exc})"))
        return result
    for n, entry in enumerate(entries, start=1):
        doi = _plain(entry.get("doi"))
        urls = entry.get("urls") or []
        record: dict[str, object] = {
            "id": doi or _plain(entry.get("id")) or f"{path.stem}#{n}",
            "title": _plain(entry.get("title") or entry.get("primary_title")),
            "abstract": _plain(entry.get("abstract") or entry.get("notes_abstract")),
            "authors": [_plain(a) for a in (entry.get("authors") or entry.get("first_authors") or [])],
            "venue": _plain(entry.get("journal_name") or entry.get("secondary_title")) or None,
            "year": _plain(entry.get("year") or str(entry.get("publication_year") or "")[:4]) or None,
            "url": (_plain(urls[0]) if urls else None) or _doi_url(doi),
        }
        if not record["abstract"]:
            del record["abstract"]
        before = len(result.problems)
        add_record(record, path, 0, seen, result, max_chars)
        for problem in result.problems[before:]:
            problem.line = None
            problem.message = f"record {n} ({str(record['title'])[:60] or 'untitled'}): {problem.message}"
    if not entries and not result.problems:
        result.problems.append(Problem(path=str(path), message="no RIS records"))
    return result
