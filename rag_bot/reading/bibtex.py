"""BibTeX (`.bib`), as Zotero, Mendeley and JabRef export it, read with bibtexparser.

An entry's id is the doc_id a rag-bot export noted, else its DOI, else its citation key; its arXiv id comes from
`eprint` (with `archivePrefix = arXiv`), its URL or its DOI. Entries without an abstract are reported by key.
"""

from __future__ import annotations

from pathlib import Path

from rag_bot.reading.fields import add_entry, identifiers_with_note, note_id, person, plain
from rag_bot.reading.fields import doi as fields_doi
from rag_bot.reading.files import ReadResult
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS, by_line
from rag_bot.types import Problem


def read_bibtex(path: Path, text: str, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """The entries of a BibTeX file that hold an abstract, as papers; the others reported by line and key."""
    import bibtexparser
    from bibtexparser import middlewares

    library = bibtexparser.parse_string(text, append_middleware=[middlewares.SeparateCoAuthors()])
    result = ReadResult(files=1)
    seen: set[str] = set()
    for block in library.failed_blocks:
        result.problems.append(Problem(path=str(path), line=(block.start_line or 0) + 1,
                                       message="not a BibTeX entry this reader can parse; skipped"))
    for entry in library.entries:
        fields = {f.key.lower(): f.value for f in entry.fields}

        def field(name: str, fields: dict[str, object] = fields) -> str:
            return plain(fields.get(name), "bibtex")

        authors = fields.get("author") or []
        eprint = field("eprint") if field("archiveprefix").lower() in ("arxiv", "") else ""
        doi = fields_doi(fields.get("doi"), "bibtex")
        record: dict[str, object] = {
            "id": note_id(field("note")) or doi or entry.key,
            "title": field("title"),
            "abstract": field("abstract"),
            "authors": [person(plain(a, "bibtex")) for a in (authors if isinstance(authors, list) else [authors])],
            "venue": field("journal") or field("booktitle") or None,
            "year": field("year") or None,
            "url": field("url") or (f"https://doi.org/{doi}" if doi else None),
            "identifiers": identifiers_with_note(
                field("note"), doi=doi, arxiv=eprint or (field("url") if "arxiv.org" in field("url") else "")),
        }
        add_entry(record, path, (entry.start_line or 0) + 1, f"entry {entry.key!r}", seen, result, max_chars)
    if not library.entries and not result.problems:
        result.problems.append(Problem(path=str(path), message="no BibTeX entries"))
    return by_line(result)
