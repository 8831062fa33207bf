"""Reading corpus files (seed .txt, .jsonl, .jsonl.gz, .csv; .bib and .ris in rag_bot/readers.py) into `Paper`s, reporting bad input with file and line.

`read_paths` holds every paper it read; `scan_paths` (what an ingest uses) reads the files once for their problems
and count and gives a `PaperStream` that reads them again, record by record, whenever it is iterated: JSON Lines
files (plain or gzipped, the format of large collections) are decoded as a stream, so memory does not grow with
the input."""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import logging
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from rag_bot.settings import Settings
from rag_bot.text import derive_title, find_links, introduced_names
from rag_bot.types import Paper, Problem

log = logging.getLogger(__name__)

SEED_HEADER = "ICML 2026 Papers"
# Reference-manager and paper-site formats (.bib .ris .json .xml .atom) are read by rag_bot/readers/.
SUFFIXES = (".txt", ".jsonl", ".jsonl.gz", ".csv", ".bib", ".ris", ".json", ".xml", ".atom")
CSV_COLUMNS = ("id", "title", "abstract")
# A seed file's blocks are separated by blank lines only, so a stray line (a heading, a footer) would become a paper:
# a block needs 8 words. A JSONL or CSV record says which field is its abstract, so its floor only has to be below
# every real one: the shortest of the 22,148 abstracts in ../shared/data/ml_abstracts.jsonl.gz have 7 words (PDF
# extractions cut short), its 0.1th percentile is 10 words, the seeds' shortest 112; 5 (half the 0.1th percentile)
# refuses placeholders ("TBD", "No abstract available.") and one-word abstracts, and no real abstract of either.
MIN_ABSTRACT_WORDS = 8
MIN_RECORD_WORDS = 5

# A publication year: none predates the first scientific journal (1665); one past 2100 is a typo (99999, 20244).
YEARS = range(1665, 2101)
HEADER_WORDS = 10
DEFAULT_MAX_ABSTRACT_CHARS: int = Settings.model_fields["max_abstract_chars"].default  # RAG_BOT_MAX_ABSTRACT_CHARS
MAX_TITLE_CHARS = 300
SENTENCE_END = re.compile(r"[.!?](?=\s)")
SENTENCE_PUNCTUATION = re.compile(r"[.!?;]")
COLLECTION_NAME = re.compile(r"\b((19|20)\d\d|papers|abstracts|proceedings|accepted|track)\b", re.IGNORECASE)
# Lone surrogates: undecodable bytes (kept by "surrogateescape") or `\ud800`-style JSON escapes; not encodable text.
SURROGATES = re.compile("[\ud800-\udfff]")
# Invalid characters, removed from record text: escape sequences a terminal would act on (CSI `ESC[...m`, OSC
# `ESC]...BEL`, two-character `ESC x`, 8-bit CSI), then control characters other than tab and newline.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -~]|\x9b[0-?]*[ -/]*[@-~]")
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CLEANED = "control characters or terminal escape sequences removed"
NOT_TEXT = "not a text corpus file (binary, or text in another encoding than UTF-8 or UTF-16: save it as UTF-8); skipped"
LINE_BREAK = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")
MAX_FILE_BYTES = 2 * 2**30  # larger files (and gzip files unpacking to more) are refused, not read into memory
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
DECODE_ERRORS = "rag_bot.corpus.escape"
codecs.register_error(
    DECODE_ERRORS,
    lambda e: ("".join(chr(0xDC00 + b) for b in e.object[e.start:e.end]), e.end),  # type: ignore[attr-defined]
)
JSON_TYPES = {list: "an array", dict: "an object", bool: "a boolean", int: "a number", float: "a number"}


def word_count(text: str) -> int:
    """The words of a text: its tokens that hold a letter ("!!! ???" and "1 2 3 4 5" hold none)."""
    return sum(1 for token in text.split() if any(ch.isalpha() for ch in token))


@dataclass
class ReadResult:
    """Papers read from some files, and the problems met on the way."""

    papers: list[Paper] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files: int = 0

    def extend(self, other: ReadResult) -> None:
        """Add another result to this one."""
        self.papers.extend(other.papers)
        self.problems.extend(other.problems)
        self.files += other.files


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _lines(text: str, keepends: bool = False) -> list[str]:
    """Lines split at `\\n`, `\\r\\n` or `\\r` only (as an editor numbers them; `str.splitlines` would also split at
    form feeds, U+2028 and other characters that may sit inside a record)."""
    lines = LINE_BREAK.split(text)
    if lines and not lines[-1]:
        lines.pop()
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


def _size(n: int) -> str:
    for unit, factor in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= factor:
            return f"{n / factor:.3g} {unit}"
    return f"{n} bytes"


def _file_problem(path: Path) -> str | None:
    """Why `path` is not read at all: not a regular file (a FIFO would hang the read, a link to `/dev/zero` would
    fill the memory, a device or a folder is no corpus), or over `MAX_FILE_BYTES`."""
    try:
        info = path.stat()  # follows symbolic links: the target is what would be read
    except OSError as exc:
        return f"cannot read ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file; skipped"
    if info.st_size > MAX_FILE_BYTES:
        return f"file is {_size(info.st_size)}, over the {_size(MAX_FILE_BYTES)} limit; skipped"
    return None


SNIFF_BYTES = 8192
# A text file holds few bytes that are not text: a Latin-1 file read as UTF-8 has one undecodable byte per accented
# letter (French: about 3 % of its characters), a file with terminal colours a few escape codes. Random bytes have
# about 55 % (half the bytes are over 0x7F, nearly all undecodable alone; a tenth are control codes): a sample with
# over a quarter of them is not text, whatever its name says.
MAX_NON_TEXT_SHARE = 0.25
NON_TEXT = re.compile("[\ud800-\udfff\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


def _sniff(head: bytes) -> tuple[int, str] | None:
    """(length of the byte-order mark, codec) of a text starting with `head` (by its byte-order mark, else UTF-8),
    or None for a binary file."""
    for bom, encoding in BOMS:
        if head.startswith(bom):
            return len(bom), encoding
    sample = head[:SNIFF_BYTES]
    if b"\x00" in sample:
        # UTF-16 without a byte-order mark: ASCII-range text has a NUL in every other byte, never in the others.
        even, odd = sample[0::2].count(0), sample[1::2].count(0)
        if odd >= len(sample) // 4 and even == 0:
            return 0, "utf-16-le"
        if even >= len(sample) // 4 and odd == 0:
            return 0, "utf-16-be"
        return None
    return (0, "utf-8") if _is_text(sample, "utf-8") else None


def _is_text(sample: bytes, codec: str) -> bool:
    """Whether a file's first bytes read as text in `codec`: at most `MAX_NON_TEXT_SHARE` of its characters are
    undecodable bytes, control codes (other than tab, line breaks, form feed and ESC) or U+FFFD."""
    text = sample.decode(codec, errors=DECODE_ERRORS)
    return not text or len(NON_TEXT.findall(text)) <= MAX_NON_TEXT_SHARE * len(text)


def _decode(data: bytes) -> tuple[str, str] | None:
    """The text and the name of its encoding (by its byte-order mark, else UTF-8), or None for a binary file.

    Undecodable bytes become lone surrogates (U+DC00 + byte), reported and replaced per line by `_read_text`."""
    sniffed = _sniff(data)
    if sniffed is None:
        return None
    skip, codec = sniffed
    return data[skip:].decode(codec, errors=DECODE_ERRORS), codec.upper()


def _check_gzip(path: Path) -> str | None:
    """Why a gzip file is not read: not readable as gzip, or unpacking to over `MAX_FILE_BYTES` (checked by
    unpacking it once as a stream, nothing kept)."""
    total = 0
    try:
        with gzip.open(path, "rb") as packed:
            while chunk := packed.read(1 << 20):
                total += len(chunk)
                if total > MAX_FILE_BYTES:
                    return f"unpacks to over {_size(MAX_FILE_BYTES)}; skipped"
    except (OSError, EOFError, zlib.error) as exc:
        return f"not a readable gzip file ({exc})"
    return None


class _Joined(io.RawIOBase):
    """A byte stream: `head`, then the rest of `stream` (what was read to sniff the encoding is not lost)."""

    def __init__(self, head: bytes, stream: Any) -> None:
        self._head = memoryview(head)
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if len(self._head):
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _stream_lines(path: Path) -> Iterator[tuple[int, str] | Problem]:
    """The lines of a text file (plain or gzipped) as (line number, line) without their line ending, decoded as a
    stream (lines split at `\n`, `\r\n` or `\r` only, like `_lines`), with the file's problems: a line holding
    bytes that are not text is reported and read with U+FFFD in their place."""
    problem = _file_problem(path)
    if problem is None and _suffix(path) == ".jsonl.gz":
        problem = _check_gzip(path)
    if problem:
        yield Problem(path=str(path), message=problem)
        return
    with (gzip.open(path, "rb") if _suffix(path) == ".jsonl.gz" else path.open("rb")) as raw:
        head = raw.read(SNIFF_BYTES)
        sniffed = _sniff(head)
        if sniffed is None:
            yield Problem(path=str(path), message=NOT_TEXT)
            return
        skip, codec = sniffed
        text = io.TextIOWrapper(io.BufferedReader(_Joined(head[skip:], raw)), encoding=codec,
                                errors=DECODE_ERRORS, newline="")
        for lineno, line in enumerate(text, start=1):
            line = line.rstrip("\r\n")
            if SURROGATES.search(line):
                yield Problem(path=str(path), line=lineno,
                              message=f"not {codec.upper()} text (invalid bytes shown as \ufffd)")
                line = SURROGATES.sub("\ufffd", line)
            yield lineno, line


def _read_text(path: Path, result: ReadResult) -> str | None:
    problem = _file_problem(path)
    if problem:
        result.problems.append(Problem(path=str(path), message=problem))
        return None
    data = path.read_bytes()
    if _suffix(path) == ".jsonl.gz":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as packed:
                data = packed.read(MAX_FILE_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            result.problems.append(Problem(path=str(path), message=f"not a readable gzip file ({exc})"))
            return None
        if len(data) > MAX_FILE_BYTES:
            result.problems.append(Problem(
                path=str(path), message=f"unpacks to over {_size(MAX_FILE_BYTES)}; skipped"
            ))
            return None
    decoded = _decode(data)
    if decoded is None:
        result.problems.append(Problem(path=str(path), message=NOT_TEXT))
        return None
    text, encoding = decoded
    if not SURROGATES.search(text):
        return text
    # Bad bytes: each line holding some is reported, and read with U+FFFD in their place.
    for lineno, line in enumerate(_lines(text), start=1):
        if SURROGATES.search(line):
            result.problems.append(
                Problem(path=str(path), line=lineno, message=f"not {encoding} text (invalid bytes shown as \ufffd)")
            )
    return SURROGATES.sub("\ufffd", text)


def _clean(value: str) -> str:
    """Text without lone surrogates (shown as U+FFFD), terminal escape sequences, and control characters other than
    tab and newline (NUL, DEL, C0 and C1 codes): none belongs in an abstract, and some act on the reader's terminal."""
    return CONTROL.sub("", ANSI_ESCAPE.sub("", SURROGATES.sub("\ufffd", value)))


def _replace_surrogates(value: object) -> object:
    """A JSON value with lone surrogates (from `\\ud800`-style escapes) replaced by U+FFFD."""
    if isinstance(value, str):
        return SURROGATES.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_replace_surrogates(k): _replace_surrogates(v) for k, v in value.items()}
    return value


def clean_value(value: object) -> object:
    """A JSON value with every string in it (keys included) cleaned by `_clean`."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, dict):
        return {_clean(str(k)): clean_value(v) for k, v in value.items()}
    return value


def _cut(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters: after its last sentence in the limit, else at its last space, as
    long as that keeps at least half of it; else right at the limit."""
    if len(text) <= limit:
        return text
    ends = [m.end() for m in SENTENCE_END.finditer(text[:limit + 1])]
    if ends and ends[-1] >= limit // 2:
        return text[:ends[-1]]
    space = text.rfind(" ", 0, limit + 1)
    return text[:space].rstrip() if space >= limit // 2 else text[:limit]


def _cut_abstract(text: str, max_chars: int, path: Path, lineno: int, result: ReadResult) -> str:
    """An abstract over `max_chars` characters cut (`_cut`), and reported: a huge record never blocks the ingest."""
    if len(text) <= max_chars:
        return text
    cut = _cut(text, max_chars)
    result.problems.append(Problem(path=str(path), line=lineno, message=f"abstract cut to {len(cut)} characters"))
    return cut


def _cut_title(text: str, path: Path, lineno: int, result: ReadResult) -> str:
    if len(text) <= MAX_TITLE_CHARS:
        return text
    cut = _cut(text, MAX_TITLE_CHARS)
    result.problems.append(Problem(path=str(path), line=lineno, message=f"title cut to {len(cut)} characters"))
    return cut


def make_paper(doc_id: str, text: str, source: str, title: str | None = None, **extra: object) -> Paper:
    """A `Paper` with its names, links and (if not given) a title derived from the text."""
    names = introduced_names(text)
    links = find_links(text)
    if extra.get("url"):
        links = list(dict.fromkeys([str(extra["url"]), *links]))
    return Paper(
        doc_id=doc_id,
        title=title or derive_title(text, names),
        text=text,
        source=source,
        aliases=names,
        links=links,
        **extra,  # type: ignore[arg-type]
    )


def _clean_lines(text: str, path: Path, result: ReadResult) -> list[str]:
    """The lines of a text file, cleaned by `_clean`; each line that held something to remove is reported once."""
    lines = _lines(text)
    for n, line in enumerate(lines):
        cleaned = _clean(line)
        if cleaned != line and SURROGATES.sub("\ufffd", line) != cleaned:
            result.problems.append(Problem(path=str(path), line=n + 1, message=CLEANED))
        lines[n] = cleaned
    return lines


def by_line(result: ReadResult) -> ReadResult:
    """The result with its problems in the order of their lines (problems of the whole file last)."""
    result.problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return result


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
    path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS, doc_prefix: str | None = None, source: str | None = None
) -> ReadResult:
    """A seed file: the header line `ICML 2026 Papers`, then abstracts separated by blank lines; its papers are
    `<doc_prefix>#<n>` (by default the file's stem; see `seed_names`) from `source` (by default its name)."""
    result = ReadResult(files=1)
    text = _read_text(path, result)
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
        abstract = _cut_abstract(abstract, max_chars, path, lineno, result)
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


def read_jsonl_file(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """JSON Lines (optionally gzipped) records with `id`, `title`, `abstract` and optional metadata."""
    result = ReadResult(files=1)
    for item in _iter_jsonl(path, max_chars):
        if isinstance(item, Problem):
            result.problems.append(item)
        else:
            result.papers.append(item)
    return by_line(result)


def _iter_jsonl(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> Iterator[Paper | Problem]:
    """The papers and problems of a JSON Lines file, record by record (the file is read as a stream)."""
    seen: set[str] = set()
    records = 0
    for item in _stream_lines(path):
        if isinstance(item, Problem):
            yield item
            if item.line is None:
                return
            continue
        lineno, line = item
        if not line.strip():
            continue
        records += 1
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            yield Problem(path=str(path), line=lineno, message=f"bad JSON ({exc.msg})")
            continue
        if not isinstance(record, dict):
            yield Problem(path=str(path), line=lineno, message="not a JSON object")
            continue
        one = ReadResult()
        if _replace_surrogates(record) != record:
            one.problems.append(Problem(
                path=str(path), line=lineno, message="invalid character (lone surrogate escape) shown as \ufffd"
            ))
        from rag_bot.readers import from_known_shape  # arXiv's snapshot, Semantic Scholar, OpenReview lines

        shaped = from_known_shape(record)
        cleaned = cast("dict[str, object]", clean_value(shaped))
        if cleaned != _replace_surrogates(shaped):
            one.problems.append(Problem(path=str(path), line=lineno, message=CLEANED))
        add_record(cleaned, path, lineno, seen, one, max_chars)
        yield from one.problems
        yield from one.papers
    if not records:
        yield Problem(path=str(path), message="no records")


def add_record(
    record: dict[str, object], path: Path, lineno: int, seen: set[str], result: ReadResult,
    max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
) -> None:
    """A JSONL or CSV record (`id`, `title`, `abstract`, optional metadata) as a paper, or its problem."""
    for key in ("id", "title", "abstract", "venue", "url"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            what = JSON_TYPES.get(type(value), type(value).__name__)
            result.problems.append(
                Problem(path=str(path), line=lineno, message=f"field {key!r} must be a string, not {what}")
            )
            return
    authors = record.get("authors") or []
    if isinstance(authors, str):
        authors = [authors]
    if not isinstance(authors, list) or not all(isinstance(a, str) for a in authors):
        result.problems.append(
            Problem(path=str(path), line=lineno, message="field 'authors' must be a string or a list of strings")
        )
        return
    ids = record.get("identifiers") or {}
    if not isinstance(ids, dict) or not all(isinstance(v, str) for v in ids.values()):
        result.problems.append(
            Problem(path=str(path), line=lineno, message="field 'identifiers' must map names to strings")
        )
        return
    missing = [k for k in ("id", "title", "abstract") if not str(record.get(k) or "").strip()]
    if missing:
        what = "empty abstract" if missing == ["abstract"] and "abstract" in record else (
            "missing field " + ", ".join(repr(m) for m in missing)
        )
        result.problems.append(Problem(path=str(path), line=lineno, message=what))
        return
    doc_id = str(record["id"]).strip()
    if doc_id in seen:
        result.problems.append(Problem(path=str(path), line=lineno, message=f"duplicate id {doc_id!r}"))
        return
    words = word_count(str(record["abstract"]))
    if words < MIN_RECORD_WORDS:
        result.problems.append(Problem(path=str(path), line=lineno, message=(
            f"abstract has only {words} word{'s' if words != 1 else ''} (an abstract has at least "
            f"{MIN_RECORD_WORDS}); skipped"
        )))
        return
    seen.add(doc_id)
    year = _year(record.get("year"), path, lineno, result)
    result.papers.append(
        make_paper(
            doc_id,
            _cut_abstract(" ".join(str(record["abstract"]).split()), max_chars, path, lineno, result),
            path.name,
            title=_cut_title(" ".join(str(record["title"]).split()), path, lineno, result),
            venue=str(record["venue"]) if record.get("venue") else None,
            year=year,
            authors=[a.strip() for a in authors if a.strip()],
            url=str(record["url"]) if record.get("url") else None,
            identifiers=_identifiers(ids, record.get("doi")),
        )
    )


def _identifiers(given: dict[str, str], doi: object) -> dict[str, str]:
    """A record's identifiers (and a top-level `doi`) in rag_bot/identity.py's spellings; unknown kinds dropped."""
    from rag_bot import identity

    out = {kind: given[kind].strip() for kind in ("openreview", "s2") if str(given.get(kind) or "").strip()}
    if found := identity.doi(given.get("doi") or doi):
        out["doi"] = found
    if found := identity.arxiv_id(given.get("arxiv")):
        out["arxiv"] = found
    return out


def _year(value: object, path: Path, lineno: int, result: ReadResult) -> int | None:
    """A record's `year` (a number or digits, in `YEARS`), or None: absent, or not a year (reported; the paper is
    kept without one)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    year: int | None = None
    if isinstance(value, float) and value.is_integer():
        year = int(value)  # 2024.0, as a spreadsheet export writes it
    elif isinstance(value, int) and not isinstance(value, bool):
        year = value
    elif isinstance(value, str) and re.fullmatch(r"\d{4}", value.strip(), re.ASCII):
        year = int(value)
    if year in YEARS:
        return year
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
    result.problems.append(Problem(path=str(path), line=lineno, message=(
        f"year {shown} is not a year ({YEARS.start}-{YEARS.stop - 1}); paper kept without a year"
    )))
    return None


def read_csv_file(path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """CSV with a header row naming `id`, `title`, `abstract` and optional `venue`, `year`, `authors`
    (separated by `;`), `url`; a record may span lines (quoted fields), problems give its first line.

    Quotes are parsed strictly: a quote that is never closed (or closed in the middle of a field) is reported as
    `file:line: unterminated quote` at the record's first line, and reading resumes on the next line, so the rows
    after it are kept instead of being swallowed into one field."""
    result = ReadResult(files=1)
    text = _read_text(path, result)
    if text is None:
        return result
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))  # a huge field is cut below, not refused
    lines = _lines(text, keepends=True)
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
    record: dict[str, object] = {k: _clean(v).strip() for k, v in zip(header, row) if k}
    if any(_clean(v) != SURROGATES.sub("\ufffd", v) for v in row):
        result.problems.append(Problem(path=str(path), line=lineno, message=CLEANED))
    if not any(record.values()):
        return
    authors = str(record.get("authors") or "")
    record["authors"] = [a.strip() for a in authors.split(";") if a.strip()]
    add_record(record, path, lineno, seen, result, max_chars)


def file_format(path: Path) -> str:
    """How a file is read: by what its start shows (rag_bot/readers `sniff`: BibTeX, RIS, an Atom feed, JSON or
    JSON lines, whatever the name), else by its extension ("seed", "csv", "jsonl", a reader's format, or
    "unknown"). A file that cannot be opened goes by its extension (its reader reports why)."""
    suffix = _suffix(path)
    if suffix == ".jsonl.gz":
        return "jsonl"
    from rag_bot.readers import BY_SUFFIX, sniff

    try:
        if _file_problem(path) is None:
            with path.open("rb") as handle:
                head = handle.read(SNIFF_BYTES)
            decoded = _decode(head)
            found = sniff(decoded[0]) if decoded else None
            if found:
                return found
    except OSError:
        pass
    return {".txt": "seed", ".csv": "csv", ".jsonl": "jsonl"}.get(suffix) or BY_SUFFIX.get(suffix, "unknown")


def read_file(
    path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS, doc_prefix: str | None = None, source: str | None = None
) -> ReadResult:
    """One corpus file, in its `file_format`; abstracts over `max_chars` characters are cut (and reported)."""
    fmt = file_format(path)
    try:
        if fmt == "seed":
            return read_seed_file(path, max_chars, doc_prefix, source)
        if fmt == "jsonl":
            return read_jsonl_file(path, max_chars)
        if fmt == "csv":
            return read_csv_file(path, max_chars)
        if fmt != "unknown":  # reference-manager and paper-site formats (rag_bot/readers/)
            from rag_bot.readers import read_reference_file

            result = ReadResult()
            text = _read_text(path, result)
            if text is None:
                return result
            got = read_reference_file(path, fmt, text, max_chars)
            got.problems[:0] = result.problems
            return got
    except OSError as exc:
        return ReadResult(problems=[Problem(path=str(path), message=f"cannot read ({exc.strerror})")])
    return ReadResult(
        problems=[Problem(path=str(path), message=f"unknown file type; expected one of {', '.join(SUFFIXES)}")]
    )


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
        if _suffix(file) == ".txt":
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


def _expand(path: Path) -> list[Path | Problem]:
    """The corpus files a path names (a folder: its corpus files, sorted by name), or its problem."""
    if path.is_dir():
        # Entries named like corpus files that are no regular file (FIFOs, devices, dangling links, links to
        # them) are reported by `read_file` and skipped; folders named `*.txt` are only walked into.
        files = sorted(
            p for p in path.rglob("*") if not p.name.startswith(".") and _suffix(p) in SUFFIXES and not p.is_dir()
        )
        return [*files] if files else [Problem(path=str(path), message="folder holds no corpus files")]
    if path.exists() or path.is_symlink():
        return [path]
    return [Problem(path=str(path), message="no such file or folder")]


def _plan(paths: Iterable[Path]) -> list[tuple[Path, str | None, str | None] | Problem]:
    """The files the paths name, each once (with its seed id prefix and source name), or their problems."""
    items: list[Path | Problem] = []
    for path in paths:
        try:
            items.extend(_expand(path))
        except OSError as exc:  # a name too long, a folder that cannot be listed...
            items.append(Problem(path=str(path), message=f"cannot read ({exc.strerror or exc})"))
    seen: set[Path] = set()
    unique_items: list[Path | Problem] = []
    for item in items:
        if isinstance(item, Path):
            real = item.resolve()
            if real in seen:
                continue
            seen.add(real)
        unique_items.append(item)
    names = seed_names(item for item in unique_items if isinstance(item, Path))
    return [item if isinstance(item, Problem) else (item, *names.get(item, (None, None))) for item in unique_items]


def iter_file(
    path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS, doc_prefix: str | None = None, source: str | None = None
) -> Iterator[Paper | Problem]:
    """One corpus file's papers and problems as they are read: JSON Lines as a stream, other files (seed and CSV
    files, small) read whole by `read_file`."""
    if file_format(path) != "jsonl":
        result = read_file(path, max_chars, doc_prefix, source)
        yield from result.problems
        yield from result.papers
        return
    try:
        yield from _iter_jsonl(path, max_chars)
    except OSError as exc:
        yield Problem(path=str(path), message=f"cannot read ({exc.strerror or exc})")


class PaperStream(list[Paper]):
    """The papers of some files, read again from the files each time it is iterated (never all held): what
    `scan_paths` gives as `ReadResult.papers`. `len()` is the number of papers the scan found; it cannot be
    indexed. A file that changed since the scan is read as it is now."""

    def __init__(self, plan: list[tuple[Path, str | None, str | None] | Problem], max_chars: int, count: int) -> None:
        super().__init__()
        self._plan = plan
        self._max_chars = max_chars
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[Paper]:
        ids: set[str] = set()
        for item in self._plan:
            if isinstance(item, Problem):
                continue
            path, prefix, source = item
            for got in iter_file(path, self._max_chars, prefix, source):
                if isinstance(got, Paper) and got.doc_id not in ids:
                    ids.add(got.doc_id)
                    yield got

    def __getitem__(self, index: object) -> Paper:  # type: ignore[override]
        raise TypeError("a PaperStream is read in order; iterate over it")

    def __repr__(self) -> str:
        return f"PaperStream({self._count} papers)"


def _read(paths: Iterable[Path], max_chars: int, keep: bool) -> ReadResult:
    """Every file's problems (each file's in the order of their lines), and its papers (kept, or counted)."""
    result = ReadResult()
    plan = _plan(paths)
    ids: set[str] = set()
    duplicates: list[Problem] = []
    kept: list[Paper] = []
    count = 0
    for item in plan:
        if isinstance(item, Problem):
            result.problems.append(item)
            continue
        path, prefix, source = item
        one = ReadResult(files=1 if _suffix(path) in SUFFIXES or file_format(path) != "unknown" else 0)
        for got in iter_file(path, max_chars, prefix, source):
            if isinstance(got, Problem):
                if got.message.startswith("cannot read ("):
                    one.files = 0
                one.problems.append(got)
            elif got.doc_id in ids:
                duplicates.append(Problem(path=got.source, message=f"duplicate id {got.doc_id!r}; kept the first"))
            else:
                ids.add(got.doc_id)
                count += 1
                if keep:
                    kept.append(got)
        result.extend(by_line(one))
    result.problems.extend(duplicates)
    result.papers = kept if keep else PaperStream(plan, max_chars, count)
    log.info("read %d papers from %d files (%d problems)", count, result.files, len(result.problems))
    for problem in result.problems:
        log.debug("input problem: %s", problem)
    return result


def read_paths(paths: Iterable[Path], max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """All papers in the given files and folders (folders: their corpus files, sorted by name); a file named twice
    is read once. Seed files sharing a stem get distinct ids by `seed_names`."""
    return _read(paths, max_chars, keep=True)


def scan_paths(paths: Iterable[Path], max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> ReadResult:
    """As `read_paths`, but holding no paper: the files are read once for their problems and the number of papers,
    and `papers` is a `PaperStream` that reads them again as it is iterated (an ingest of any size in bounded
    memory)."""
    return _read(paths, max_chars, keep=False)
