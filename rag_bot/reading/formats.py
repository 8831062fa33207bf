"""Reading what reference managers and paper sites export, one module per format: BibTeX and RIS (bibtexparser,
rispy), CSL-JSON, arXiv's OAI JSON lines and API Atom feed, OpenReview notes and Semantic Scholar papers.

Takes a file (rag_bot/reading/corpus.py hands over every file that is not a seed, CSV or plain JSONL file, and every
record of a JSON Lines file) and returns a `ReadResult`: papers with their identifiers (DOI, arXiv id, OpenReview
id, Semantic Scholar id), authors, venue, year and URL; problems per entry, never a traceback. The format is chosen
by content first (`sniff`: a `.txt` holding BibTeX is read as BibTeX; arXiv's snapshot, named `.json`, is JSON
lines), then by extension.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rag_bot.reading.arxiv import from_arxiv_record, is_arxiv_record, read_atom
from rag_bot.reading.bibtex import read_bibtex
from rag_bot.reading.csl import from_csl, is_csl
from rag_bot.reading.fields import add_entry
from rag_bot.reading.files import ReadResult
from rag_bot.reading.openreview import from_openreview_note, is_openreview_note
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS
from rag_bot.reading.ris import read_ris
from rag_bot.reading.semantic_scholar import from_s2_paper, is_s2_paper
from rag_bot.types import Problem

__all__ = ["MAX_JSON_DEPTH", "from_known_shape", "is_json", "load_json", "read_reference_file", "sniff"]

# The deepest shape a known site exports is 6 levels (an OpenReview v2 answer: the answer, its notes, a note, its
# content, a field, a list of values); each of the 22,148 real records of ../shared/data is 2 (a list in a record). A
# document deeper than 32 is refused whole: every step that walks a record (cleaning, comparing) then stays far
# below Python's recursion limit (1,000 frames), which a document of a few thousand `[` would reach.
MAX_JSON_DEPTH = 32

_SHAPES = ((is_arxiv_record, from_arxiv_record), (is_openreview_note, from_openreview_note),
           (is_s2_paper, from_s2_paper), (is_csl, from_csl))
_BIBTEX = re.compile(r"^\s*(?:%[^\n]*\n\s*)*@[A-Za-z]+\s*[{(]")
_RIS = re.compile(r"^(?:\d+\.?[ \t]*\r?\n)?\s*TY  - ")  # rispy numbers its records ("1.")
_LISTS = ("notes", "data", "items", "papers", "results")  # where APIs put the list of records


def _depth(value: object) -> int:
    """How deeply a JSON value nests (a string is 0, `[]` is 1), counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def load_json(text: str) -> Any:
    """`json.loads`, with a document nested deeper than `MAX_JSON_DEPTH` refused: `json.JSONDecodeError` for bad
    JSON, `ValueError` ("nested deeper than ...") for a document too deep."""
    too_deep = ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels; skipped")
    try:
        value = json.loads(text)
    except RecursionError:
        raise too_deep from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise too_deep
    return value


def is_json(text: str) -> bool:
    """Whether a text is one JSON document (a `.txt` starting with `[` may be a seed file's abstract)."""
    try:
        json.loads(text.lstrip("\ufeff"))
    except (ValueError, RecursionError):
        return False
    return True


def from_known_shape(record: dict[str, object]) -> dict[str, object]:
    """A record of a known site's shape (arXiv, OpenReview, Semantic Scholar, CSL-JSON) as a corpus record; any
    other record (rag-bot's own JSONL fields) as it is."""
    for test, convert in _SHAPES:
        if test(record):
            return convert(record)
    return record


def sniff(head: str) -> str | None:
    """The format the start of a file shows: "bibtex", "ris", "atom", "json" (one document) or "jsonl"; None
    when it shows none of them (a seed file, CSV)."""
    text = head.lstrip("\ufeff \t\r\n")
    if _BIBTEX.match(head.lstrip("\ufeff")):
        return "bibtex"
    if _RIS.match(text[:200]):
        return "ris"
    if text.startswith("<"):
        return "atom" if "<feed" in text[:2000] else None
    if text.startswith("["):
        return "json"
    if text.startswith("{"):
        first, newline, _ = text.partition("\n")
        if not newline:
            return None  # one line longer than the head: JSON lines or one object, as the extension says
        try:
            json.loads(first)
        except ValueError:
            return "json"  # an object over several lines
        return "jsonl"
    return None


def read_json(path: Path, text: str, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """A JSON document: a list of records (CSL-JSON, a Semantic Scholar batch), an API answer holding one under
    `notes`, `data`, `items`, `papers` or `results`, or one record."""
    result = ReadResult(files=1)
    try:
        doc = load_json(text.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        result.problems.append(Problem(path=str(path), line=exc.lineno, message=f"bad JSON ({exc.msg})"))
        return result
    except ValueError as exc:  # nested too deeply
        result.problems.append(Problem(path=str(path), message=str(exc)))
        return result
    if isinstance(doc, dict):
        doc = next((doc[k] for k in _LISTS if isinstance(doc.get(k), list)), [doc])
    if not isinstance(doc, list):
        result.problems.append(Problem(path=str(path), message="not a list of records nor a record"))
        return result
    seen: set[str] = set()
    for n, item in enumerate(doc, start=1):
        if item is None:  # a batch answer's paper that was not found
            continue
        if not isinstance(item, dict):
            result.problems.append(Problem(path=str(path), message=f"item {n}: not a JSON object"))
            continue
        record = from_known_shape(item)
        title = str(record.get("title") or "")[:60] or "untitled"
        add_entry(dict(record), path, 0, f"item {n} ({title})", seen, result, max_chars)
    if not doc:
        result.problems.append(Problem(path=str(path), message="no records"))
    return result


_READERS = {"bibtex": read_bibtex, "ris": read_ris, "atom": read_atom, "json": read_json}
BY_SUFFIX = {".bib": "bibtex", ".ris": "ris", ".xml": "atom", ".atom": "atom", ".json": "json"}


def read_reference_file(path: Path, fmt: str, text: str,
                        max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """A whole file of one of the formats ("bibtex", "ris", "atom", "json")."""
    return _READERS[fmt](path, text, max_chars)
