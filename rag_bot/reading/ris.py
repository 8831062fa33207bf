"""RIS (`.ris`), as reference managers export it, read with rispy.

A record's id is the doc_id a rag-bot export noted, else its DOI, else its `ID` field, else its position.
Records without an abstract are reported by position and title.
"""

from __future__ import annotations

import re
from pathlib import Path

from rag_bot.reading.fields import add_entry, identifiers_with_note, note_id, person, plain, year
from rag_bot.reading.fields import doi as fields_doi
from rag_bot.reading.files import ReadResult, split_lines
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS
from rag_bot.types import Problem

_TAG = re.compile(r"^([A-Z][A-Z0-9])  -")  # a RIS line's tag, as rispy matches it


def _closed(path: Path, text: str, result: ReadResult) -> str:
    """The text with an `ER` line added where a record lacks one: before the next record's `TY` (reported: rispy
    reads a `TY` inside an open record as a field of it, so the next record would be lost), and at the end (rispy
    drops an unended last record)."""
    out: list[str] = []
    opened = 0  # line of the open record's TY (0: none open)
    records = 0
    for lineno, line in enumerate(split_lines(text), start=1):
        tag = match.group(1) if (match := _TAG.match(line)) else None
        if tag == "TY":
            if opened:
                out.append("ER  - ")
                result.problems.append(Problem(path=str(path), line=opened, message=(
                    f"record {records}: no 'ER  - ' line before the next record (line {lineno}); read as ending there")))
            records += 1
            opened = lineno
        elif tag == "ER":
            opened = 0
        out.append(line)
    if opened:  # the file's end ends the last record: nothing follows it to lose, so nothing to report
        out.append("ER  - ")
    return "\n".join(out) + "\n"


def read_ris(path: Path, text: str, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """The records of a RIS file that hold an abstract, as papers; the others reported by their position."""
    import rispy

    result = ReadResult(files=1)
    seen: set[str] = set()
    try:
        entries = rispy.loads(_closed(path, text.lstrip("\ufeff"), result))
    except Exception as exc:  # rispy raises bare errors on a malformed file
        result.problems.append(Problem(path=str(path), message=f"not a RIS file this reader can parse ({exc})"))
        return result
    for n, entry in enumerate(entries, start=1):
        doi = fields_doi(entry.get("doi"))
        urls = [plain(u) for u in entry.get("urls") or []]
        notes = " ".join(plain(x) for x in entry.get("notes") or [])
        title = plain(entry.get("title") or entry.get("primary_title"))
        record: dict[str, object] = {
            "id": note_id(notes) or doi or plain(entry.get("id")) or f"{path.stem}#{n}",
            "title": title,
            "abstract": plain(entry.get("abstract") or entry.get("notes_abstract")),
            "authors": [person(plain(a)) for a in (entry.get("authors") or entry.get("first_authors") or [])],
            "venue": plain(entry.get("journal_name") or entry.get("secondary_title")) or None,
            "year": year(entry.get("year") or entry.get("publication_year")),
            "url": (urls[0] if urls else None) or (f"https://doi.org/{doi}" if doi else None),
            "identifiers": identifiers_with_note(notes, doi=doi, arxiv=next((u for u in urls if "arxiv.org" in u), "")),
        }
        add_entry(record, path, 0, f"record {n} ({title[:60] or 'untitled'})", seen, result, max_chars)
    if not entries and not result.problems:
        result.problems.append(Problem(path=str(path), message="no RIS records"))
    return result
