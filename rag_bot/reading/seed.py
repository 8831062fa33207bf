"""Seed files: a header line (`ICML 2026 Papers`), then abstracts separated by blank lines, without titles. Each
abstract becomes `<file stem>#<n>` with a title derived from its text; `seed_names` keeps ids distinct when files
read together share a stem."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from rag_bot.reading.files import (
    CLEANED,
    MAX_FILE_BYTES,
    SURROGATES,
    ReadResult,
    clean_text,
    file_suffix,
    read_corpus_text,
    split_lines,
    word_count,
)
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS, by_line, cut_abstract, make_paper
from rag_bot.types import Problem

SEED_HEADER = "ICML 2026 Papers"
# A seed file's blocks are separated by blank lines only, so a stray line (a heading, a footer) would become a paper:
# a block needs 8 words. A JSONL or CSV record says which field is its abstract, so its floor only has to be below
# every real one: the shortest of the 22,148 abstracts in ../shared/data/ml_abstracts.jsonl.gz have 7 words (PDF
# extractions cut short), its 0.1th percentile is 10 words, the seeds' shortest 112; 5 (half the 0.1th percentile)
# refuses placeholders ("TBD", "No abstract available.") and one-word abstracts, and no real abstract of either.
MIN_ABSTRACT_WORDS = 8
HEADER_WORDS = 10
SENTENCE_PUNCTUATION = re.compile(r"[.!?;]")
COLLECTION_NAME = re.compile(r"\b((19|20)\d\d|papers|abstracts|proceedings|accepted|track)\b", re.IGNORECASE)


def _clean_lines(text: str, path: Path, result: ReadResult) -> list[str]:
    """The lines of a text file, cleaned by `clean_text`; each line that held something to remove is reported once."""
    lines = split_lines(text)
    for n, line in enumerate(lines):
        cleaned = clean_text(line)
        if cleaned != line and SURROGATES.sub("\ufffd", line) != cleaned:
            result.problems.append(Problem(path=str(path), line=n + 1, message=CLEANED))
        lines[n] = cleaned
    return lines


def _header_line(lines: list[str]) -> tuple[bool, bool]:
    """Whether the first line of a seed file is a header line (and whether that is in doubt).

    It is one when it looks like a heading: short (at most `HEADER_WORDS` words and 80 characters), no sentence
    punctuation (`.`, `!`, `?`, `;`), and followed by a blank line (or nothing). Otherwise it is the start of the
    first abstract and kept as such. A heading that names a collection (`NeurIPS 2025 Papers`: a year or a word like
    "papers", "abstracts", "proceedings") is taken without a word; any other is taken but reported, since it might be
    a one-line abstract."""
    first = lines[0].strip()
    heading = (
        len(first) <= 80
        and len(first.split()) <= HEADER_WORDS
        and not SENTENCE_PUNCTUATION.search(first)
        and (len(lines) == 1 or not lines[1].strip())
    )
    return heading, heading and not COLLECTION_NAME.search(first)


def read_seed_file(
    path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS, doc_prefix: str | None = None, source: str | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> ReadResult:
    """A seed file: the header line `ICML 2026 Papers`, then abstracts separated by blank lines; its papers are
    `<doc_prefix>#<n>` (by default the file's stem; see `seed_names`) from `source` (by default its name)."""
    result = ReadResult(files=1)
    text = read_corpus_text(path, result, max_file_bytes)
    if text is None:
        return result
    lines = _clean_lines(text, path, result)
    start = 0
    first = lines[0].strip() if lines else ""
    if first == SEED_HEADER:
        start = 1
    elif first:
        header, doubt = _header_line(lines)
        if header:
            start = 1
            if doubt:
                result.problems.append(Problem(path=str(path), line=1, message=(
                    f"first line {first!r} taken as the header line, not as an abstract"
                )))
        else:
            result.problems.append(
                Problem(path=str(path), line=1, message=f"no header line '{SEED_HEADER}'; read anyway")
            )
    blocks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    first_line = 0
    for lineno, line in enumerate(lines[start:], start=start + 1):
        if line.strip():
            if not current:
                first_line = lineno
            current.append(line.strip())
        elif current:
            blocks.append((first_line, current))
            current = []
    if current:
        blocks.append((first_line, current))
    for n, (lineno, block) in enumerate(blocks, start=1):
        abstract = " ".join(block)
        words = word_count(abstract)
        if words < MIN_ABSTRACT_WORDS:
            result.problems.append(
                Problem(path=str(path), line=lineno, message=f"abstract {n} has only {words} words; skipped")
            )
            continue
        abstract = cut_abstract(abstract, max_chars, path, lineno, result)
        venue, year = venue_and_year(lines[0].strip() if start else "")
        result.papers.append(make_paper(f"{doc_prefix or path.stem}#{n}", abstract, source or path.name,
                                        venue=venue, year=year))
    if not blocks:
        result.problems.append(Problem(path=str(path), message="no abstracts found"))
    return by_line(result)


_VENUE_HEADER = re.compile(r"^([A-Z][A-Za-z\-]{1,19})\s+((?:19|20)\d\d)\b")


def venue_and_year(header: str) -> tuple[str | None, int | None]:
    """The venue and year a seed file's header names ("ICML 2026 Papers" -> ICML, 2026), if any."""
    match = _VENUE_HEADER.match(header)
    return (match.group(1), int(match.group(2))) if match else (None, None)


def seed_names(files: Iterable[Path]) -> dict[Path, tuple[str, str]]:
    """The id prefix and source name of each seed file whose stem another seed file read with it shares.

    A seed file's papers are `<stem>#<n>` and its source is its file name: that stays so for every file whose stem
    is unique among the seed files read together (the usual case; the seeds keep `000_9ecb01dab6d44e76#13`). Files
    that share a stem (`a/papers.txt`, `b/papers.txt`) are each named by the shortest end of their path that tells
    them apart: ids `a/papers#<n>` and `b/papers#<n>`, sources `a/papers.txt` and `b/papers.txt` (in one folder,
    `x.txt` and `x.TXT` become `x.txt#<n>` and `x.TXT#<n>`). The names depend only on which files are read together,
    not on how they were named on the command line (a folder or its files, relative or absolute paths), so the
    same ingest gives the same ids on every run. Files of the same stem ingested by separate commands cannot see
    each other: they get the same ids, and the second ingest updates the first one's papers (ingest them together,
    or rename one)."""
    groups: dict[str, list[Path]] = {}
    for file in files:
        if file_suffix(file) == ".txt":
            groups.setdefault(file.stem, []).append(file)
    names: dict[Path, tuple[str, str]] = {}
    for stem, group in groups.items():
        if len(group) < 2:
            continue
        folders = {f: tuple(part for part in Path(os.path.abspath(f)).parts[:-1] if part.strip("/\\")) for f in group}
        for file in group:
            for k in range(1, len(folders[file]) + 1):
                end = folders[file][-k:]
                if sum(folders[other][-k:] == end for other in group) == 1:
                    names[file] = ("/".join((*end, stem)), "/".join((*end, file.name)))
                    break
            else:  # same folder: the names differ by the case of their extension
                source = "/".join((*folders[file][-1:], file.name))
                names[file] = (source, source)
    return names
