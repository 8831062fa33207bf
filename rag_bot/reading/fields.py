"""What every reader does to a field: plain text from BibTeX escapes and HTML, a person's name in one order, a
year from a date, the rag-bot id an export left in a note, and one entry through the corpus's record checks."""

from __future__ import annotations

import html
import re
from pathlib import Path

from rag_bot.reading.files import CLEANED, ReadResult, clean_value
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS, add_record
from rag_bot.types import Problem

_ESCAPED = re.compile(r"\\([&%$#_{}])")
_BIBTEX_WORDS = {r"\textasciitilde{}": "~", r"\^{}": "^"}
_TAG = re.compile(r"</?[a-zA-Z][^<>]{0,200}>")
_NOTE = re.compile(r"rag-bot doc_id (?P<id>[^;]+?)\s*(?:;|$)")
_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|2\d\d\d)(?!\d)")


def plain(value: object, markup: str = "") -> str:
    """A field as one line of text. `markup="bibtex"`: BibTeX's protecting braces and escapes undone (LaTeX math and
    commands stay, cleaned when shown, as the seeds' are); `markup="html"`: entities decoded and tags dropped."""
    text = " ".join(str(value or "").split())
    if markup == "bibtex":
        for word, char in _BIBTEX_WORDS.items():
            text = text.replace(word, char)
        parts = _ESCAPED.split(text)  # odd positions are escaped characters: keep them, drop the bare braces
        text = "".join(part if n % 2 else part.replace("{", "").replace("}", "") for n, part in enumerate(parts))
    elif markup == "html":
        text = " ".join(html.unescape(_TAG.sub(" ", text)).split())
    return text


def as_dict(value: object) -> dict[str, object]:
    """A field that should hold an object: it, or {} when it holds anything else (a site's odd record)."""
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[object]:
    """A field that should hold a list: it, [] when empty or missing, or the one value it holds otherwise."""
    return value if isinstance(value, list) else [] if value in (None, "", {}) else [value]


def doi(value: object, markup: str = "") -> str:
    """A field's DOI in its one spelling (lower case, no resolver), or ""."""
    from rag_bot.reading import identity

    return identity.doi(plain(value, markup)) or ""


def person(name: str) -> str:
    """"Jane Doe" from "Doe, Jane" (and "Doe, Jr., Jane"), as the collection's records name authors."""
    name = " ".join(name.split())
    parts = [p.strip() for p in name.split(",")]
    if len(parts) == 2 and all(parts):
        return f"{parts[1]} {parts[0]}"
    if len(parts) == 3 and all(parts):
        return f"{parts[2]} {parts[0]} {parts[1]}"
    return name


def year(value: object) -> str | None:
    """The first plausible year in a date ("2024-05-01", "Mon, 2 Apr 2007 ...", [[2024, 5]]), as digits."""
    match = _YEAR.search(str(value or ""))
    return match.group(1) if match else None


_NOTED = re.compile(r";\s*(doi|arxiv|openreview|s2) ([^;\s]+)")


def noted_identifiers(note: object) -> dict[str, str]:
    """The identifiers a rag-bot export wrote into a note after the doc_id ("...; arxiv 2101.00001")."""
    text = " ".join(str(note or "").split())
    return dict(_NOTED.findall(text)) if _NOTE.search(text) else {}


def identifiers_with_note(note: object, **given: str) -> dict[str, str]:
    """The identifiers the fields give, and those a rag-bot export noted for the rest."""
    return {**noted_identifiers(note), **{kind: value for kind, value in given.items() if value}}


def note_id(note: object) -> str | None:
    """The doc_id a rag-bot export wrote into a note ("rag-bot doc_id X; source Y"), so a round trip keeps ids."""
    match = _NOTE.search(" ".join(str(note or "").split()))
    return match.group("id").strip() if match else None


def add_entry(record: dict[str, object], path: Path, line: int, label: str, seen: set[str], result: ReadResult,
              max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> None:
    """One entry through the corpus's record checks (those of a JSONL line), its problems named by `label` (a
    BibTeX key, "record 3 (title)"): an entry without an abstract is reported and skipped."""
    if not record.get("abstract"):
        record.pop("abstract", None)  # reported as a missing field, like a JSONL record's
    cleaned = clean_value(record)
    one = ReadResult()
    if cleaned != record:
        one.problems.append(Problem(path=str(path), line=line or None, message=CLEANED))
    add_record(cleaned, path, line, seen, one, max_chars)  # type: ignore[arg-type]
    for problem in one.problems:
        problem.message = f"{label}: {problem.message}"
        problem.line = line or None
    result.problems.extend(one.problems)
    result.papers.extend(one.papers)

