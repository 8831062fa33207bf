"""Records one per line or row: JSON Lines (plain or gzipped, streamed; a line in arXiv's, OpenReview's or Semantic
Scholar's shape is converted first by `formats.from_known_shape`) and CSV with a header row."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from rag_bot.reading.files import (
    CLEANED,
    MAX_FILE_BYTES,
    SURROGATES,
    ReadResult,
    clean_text,
    clean_value,
    read_corpus_text,
    replace_surrogates,
    split_lines,
    stream_lines,
)
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS, add_record, by_line
from rag_bot.types import Paper, Problem

CSV_COLUMNS = ("id", "title", "abstract")


def read_jsonl_file(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
                    max_file_bytes: int = MAX_FILE_BYTES) -> ReadResult:
    """JSON Lines (optionally gzipped) records with `id`, `title`, `abstract` and optional metadata."""
    result = ReadResult(files=1)
    for item in iter_jsonl(path, max_chars, max_file_bytes):
        if isinstance(item, Problem):
            result.problems.append(item)
        else:
            result.papers.append(item)
    return by_line(result)


def iter_jsonl(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
                max_file_bytes: int = MAX_FILE_BYTES) -> Iterator[Paper | Problem]:
    """The papers and problems of a JSON Lines file, record by record (the file is read as a stream)."""
    seen: set[str] = set()
    records = 0
    for item in stream_lines(path, max_file_bytes):
        if isinstance(item, Problem):
            yield item
            if item.line is None:
                return
            records += 1  # a line's problem (one skipped as over-long): the file held a record
            continue
        lineno, line = item
        if not line.strip():
            continue
        records += 1
        from rag_bot.reading.formats import from_known_shape, load_json  # arXiv's, S2's, OpenReview's lines

        try:
            record = load_json(line)
        except json.JSONDecodeError as exc:
            yield Problem(path=str(path), line=lineno, message=f"bad JSON ({exc.msg})")
            continue
        except ValueError as exc:  # nested too deeply
            yield Problem(path=str(path), line=lineno, message=str(exc))
            continue
        if not isinstance(record, dict):
            yield Problem(path=str(path), line=lineno, message="not a JSON object")
            continue
        one = ReadResult()
        if replace_surrogates(record) != record:
            one.problems.append(Problem(
                path=str(path), line=lineno, message="invalid character (lone surrogate escape) shown as \ufffd"
            ))
        shaped = from_known_shape(record)
        cleaned = cast("dict[str, object]", clean_value(shaped))
        if cleaned != replace_surrogates(shaped):
            one.problems.append(Problem(path=str(path), line=lineno, message=CLEANED))
        add_record(cleaned, path, lineno, seen, one, max_chars)
        yield from one.problems
        yield from one.papers
    if not records:
        yield Problem(path=str(path), message="no records")


def read_csv_file(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
                  max_file_bytes: int = MAX_FILE_BYTES) -> ReadResult:
    """CSV with a header row naming `id`, `title`, `abstract` and optional `venue`, `year`, `authors`
    (separated by `;`), `url`; a record may span lines (quoted fields), problems give its first line.

    Quotes are parsed strictly: a quote that is never closed (or closed in the middle of a field) is reported as
    `file:line: unterminated quote` at the record's first line, and reading resumes on the next line, so the rows
    after it are kept instead of being swallowed into one field."""
    result = ReadResult(files=1)
    text = read_corpus_text(path, result, max_file_bytes)
    if text is None:
        return result
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # a huge field is cut below, not refused
    lines = split_lines(text, keepends=True)
    header_reader = csv.reader(lines[:1], strict=True)
    try:
        header = [name.strip().lower() for name in next(header_reader, [])]
    except csv.Error as exc:
        result.problems.append(Problem(path=str(path), line=1, message=f"bad CSV header ({exc})"))
        return result
    missing = [c for c in CSV_COLUMNS if c not in header]
    if missing:
        result.problems.append(
            Problem(path=str(path), line=1, message="header lacks column " + ", ".join(repr(m) for m in missing)
                    + f" (expected {','.join(CSV_COLUMNS)} and optional venue,year,authors,url)")
        )
        return result
    seen: set[str] = set()
    rows = 0
    start = 1  # index in `lines` where the current reader starts
    while start < len(lines):
        reader = csv.reader(lines[start:], strict=True)
        lineno = start + 1
        try:
            for row in reader:
                if row:
                    rows += 1
                    _add_csv_row(row, header, path, lineno, seen, result, max_chars)
                lineno = start + reader.line_num + 1
            break
        except csv.Error as exc:
            rows += 1
            spans_lines = start + reader.line_num + 1 > lineno + 1
            if spans_lines or "end of data" in str(exc):
                message = "unterminated quote (a quoted field is never closed); row skipped"
            else:
                message = f"bad CSV ({exc}); row skipped"
            result.problems.append(Problem(path=str(path), line=lineno, message=message))
            start = lineno  # resume on the line after the record's first line
    if not rows:
        result.problems.append(Problem(path=str(path), message="no records"))
    return by_line(result)


def _add_csv_row(
    row: list[str], header: list[str], path: Path, lineno: int, seen: set[str], result: ReadResult,
    max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
) -> None:
    if len(row) > len(header):
        result.problems.append(Problem(path=str(path), line=lineno, message="more fields than the header"))
        return
    record: dict[str, object] = {k: clean_text(v).strip() for k, v in zip(header, row) if k}
    if any(clean_text(v) != SURROGATES.sub("\ufffd", v) for v in row):
        result.problems.append(Problem(path=str(path), line=lineno, message=CLEANED))
    if not any(record.values()):
        return
    authors = str(record.get("authors") or "")
    record["authors"] = [a.strip() for a in authors.split(";") if a.strip()]
    add_record(record, path, lineno, seen, result, max_chars)
