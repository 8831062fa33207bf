"""Files as text: what is refused unread (not a regular file, too big, not text), decoding (byte-order marks,
UTF-16, bad bytes kept visible as U+FFFD), lines streamed from plain or gzipped files, and the characters removed
from every record (terminal escapes, control characters). Also the `ReadResult` every reader returns."""

from __future__ import annotations

import codecs
import gzip
import io
import re
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_bot.reading import limits
from rag_bot.types import Paper, Problem

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
DECODE_ERRORS = "rag_bot.reading.files.escape"
codecs.register_error(
    DECODE_ERRORS,
    lambda e: ("".join(chr(0xDC00 + b) for b in e.object[e.start:e.end]), e.end),  # type: ignore[attr-defined]
)


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


def file_suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def split_lines(text: str, keepends: bool = False) -> list[str]:
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


def file_problem(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """Why `path` is not read at all: not a regular file (a FIFO would hang the read, a link to `/dev/zero` would
    fill the memory, a device or a folder is no corpus), or over `max_bytes` (`MAX_FILE_BYTES`)."""
    try:
        info = path.stat()  # follows symbolic links: the target is what would be read
    except OSError as exc:
        return f"cannot read ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file; skipped"
    if info.st_size > max_bytes:
        return f"file is {_size(info.st_size)}, over the {_size(max_bytes)} limit; skipped"
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


def decode_text(data: bytes) -> tuple[str, str] | None:
    """The text and the name of its encoding (by its byte-order mark, else UTF-8), or None for a binary file.

    Undecodable bytes become lone surrogates (U+DC00 + byte), reported and replaced per line by `read_corpus_text`."""
    sniffed = _sniff(data)
    if sniffed is None:
        return None
    skip, codec = sniffed
    return data[skip:].decode(codec, errors=DECODE_ERRORS), codec.upper()


def _check_gzip(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    """Why a gzip file is not read: not readable as gzip, or unpacking to over `max_bytes` (checked by
    unpacking it once as a stream, nothing kept)."""
    total = 0
    try:
        with gzip.open(path, "rb") as packed:
            while chunk := packed.read(1 << 20):
                total += len(chunk)
                if total > max_bytes:
                    return f"unpacks to over {_size(max_bytes)}; skipped"
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


READ_THROUGH = 1 << 20  # characters held at a time while an over-long line is read through to its end


def _bounded_lines(text: io.TextIOBase, limit: int) -> Iterator[str | None]:
    """Each line of `text` with its ending, or None for a line of over `limit` characters: that one is read through
    `READ_THROUGH` characters at a time, never held whole (one 300 MB line took 6.1 GB)."""
    while line := text.readline(limit + 1):
        if len(line) <= limit or line.endswith(("\n", "\r")):
            yield line
            continue
        while (rest := text.readline(READ_THROUGH)) and not rest.endswith(("\n", "\r")):
            pass
        yield None


def stream_lines(path: Path, max_bytes: int = MAX_FILE_BYTES) -> Iterator[tuple[int, str] | Problem]:
    """The lines of a text file (plain or gzipped) as (line number, line) without their line ending, decoded as a
    stream (lines split at `\n`, `\r\n` or `\r` only, like `split_lines`), with the file's problems: a line holding
    bytes that are not text is reported and read with U+FFFD in their place, and a line over `limits.LINE_CHARS`
    (longer than any record within the field limits) is reported and skipped as it streams; a file over
    `max_bytes` (unpacked) is reported and not read."""
    problem = file_problem(path, max_bytes)
    if problem is None and file_suffix(path) == ".jsonl.gz":
        problem = _check_gzip(path, max_bytes)
    if problem:
        yield Problem(path=str(path), message=problem)
        return
    with (gzip.open(path, "rb") if file_suffix(path) == ".jsonl.gz" else path.open("rb")) as raw:
        head = raw.read(SNIFF_BYTES)
        sniffed = _sniff(head)
        if sniffed is None:
            yield Problem(path=str(path), message=NOT_TEXT)
            return
        skip, codec = sniffed
        text = io.TextIOWrapper(io.BufferedReader(_Joined(head[skip:], raw)), encoding=codec,
                                errors=DECODE_ERRORS, newline="")
        for lineno, line in enumerate(_bounded_lines(text, limits.LINE_CHARS), start=1):
            if line is None:
                yield Problem(path=str(path), line=lineno, message=f"line over {limits.LINE_CHARS:,} characters; skipped")
                continue
            line = line.rstrip("\r\n")
            if SURROGATES.search(line):
                yield Problem(path=str(path), line=lineno,
                              message=f"not {codec.upper()} text (invalid bytes shown as \ufffd)")
                line = SURROGATES.sub("\ufffd", line)
            yield lineno, line


def read_corpus_text(path: Path, result: ReadResult, max_bytes: int = MAX_FILE_BYTES) -> str | None:
    problem = file_problem(path, max_bytes)
    if problem:
        result.problems.append(Problem(path=str(path), message=problem))
        return None
    if file_suffix(path) == ".jsonl.gz":
        problem = _check_gzip(path, max_bytes)  # its unpacked size, streamed: nothing held until it is known to fit
        if problem:
            result.problems.append(Problem(path=str(path), message=problem))
            return None
        with gzip.open(path, "rb") as packed:
            data = packed.read()
    else:
        data = path.read_bytes()
    decoded = decode_text(data)
    if decoded is None:
        result.problems.append(Problem(path=str(path), message=NOT_TEXT))
        return None
    text, encoding = decoded
    if not SURROGATES.search(text):
        return text
    # Bad bytes: each line holding some is reported, and read with U+FFFD in their place.
    for lineno, line in enumerate(split_lines(text), start=1):
        if SURROGATES.search(line):
            result.problems.append(
                Problem(path=str(path), line=lineno, message=f"not {encoding} text (invalid bytes shown as \ufffd)")
            )
    return SURROGATES.sub("\ufffd", text)


def clean_text(value: str) -> str:
    """Text without lone surrogates (shown as U+FFFD), terminal escape sequences, and control characters other than
    tab and newline (NUL, DEL, C0 and C1 codes): none belongs in an abstract, and some act on the reader's terminal
    (the CLI prints an LLM's answer through it too)."""
    return CONTROL.sub("", ANSI_ESCAPE.sub("", SURROGATES.sub("\ufffd", value)))


def replace_surrogates(value: object) -> object:
    """A JSON value with lone surrogates (from `\\ud800`-style escapes) replaced by U+FFFD."""
    if isinstance(value, str):
        return SURROGATES.sub("\ufffd", value)
    if isinstance(value, list):
        return [replace_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates(v) for k, v in value.items()}
    return value


def clean_value(value: object) -> object:
    """A JSON value with every string in it (keys included) cleaned by `clean_text`."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    return value
