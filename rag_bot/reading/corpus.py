"""Reading corpus files and folders (seed .txt, JSONL, CSV and the formats of rag_bot/reading/formats.py) into `Paper`s, reporting bad input with file and line.

`read_paths` holds every paper it read; `scan_paths` (what an ingest uses) reads the files once for their problems
and count and gives a `PaperStream` that reads them again, record by record, whenever it is iterated: JSON Lines
files (plain or gzipped, the format of large collections) are decoded as a stream, so memory does not grow with
the input."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

from rag_bot.reading.files import (
    MAX_FILE_BYTES,
    SNIFF_BYTES,
    ReadResult,
    decode_text,
    file_problem,
    file_suffix,
    read_corpus_text,
)
from rag_bot.reading.records import DEFAULT_MAX_ABSTRACT_CHARS, by_line
from rag_bot.reading.seed import read_seed_file, seed_names
from rag_bot.reading.tables import iter_jsonl, read_csv_file, read_jsonl_file
from rag_bot.types import Paper, Problem

log = logging.getLogger(__name__)

# Reference-manager and paper-site formats (.bib .ris .json .xml .atom) are read by rag_bot/reading/formats/.
SUFFIXES = (".txt", ".jsonl", ".jsonl.gz", ".csv", ".bib", ".ris", ".json", ".xml", ".atom")


def file_format(path: Path) -> str:
    """How a file is read: by what its start shows (rag_bot/readers `sniff`: BibTeX, RIS, an Atom feed, JSON or
    JSON lines, whatever the name), else by its extension ("seed", "csv", "jsonl", a reader's format, or
    "unknown"). A file that cannot be opened goes by its extension (its reader reports why)."""
    suffix = file_suffix(path)
    if suffix == ".jsonl.gz":
        return "jsonl"
    from rag_bot.reading.formats import BY_SUFFIX, sniff

    try:
        if file_problem(path) is None:
            with path.open("rb") as handle:
                head = handle.read(SNIFF_BYTES)
            decoded = decode_text(head)
            found = sniff(decoded[0]) if decoded else None
            if found:
                return found
    except OSError:
        pass
    return {".txt": "seed", ".csv": "csv", ".jsonl": "jsonl"}.get(suffix) or BY_SUFFIX.get(suffix, "unknown")


def read_file(
    path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS, doc_prefix: str | None = None, source: str | None = None,
    fmt: str | None = None, max_file_bytes: int = MAX_FILE_BYTES,
) -> ReadResult:
    """One corpus file, in its `file_format` (`fmt` when the caller already sniffed it); abstracts over
    `max_chars` characters are cut (and reported); a file over `max_file_bytes` is reported and not read."""
    fmt = fmt or file_format(path)
    try:
        if fmt == "seed":
            return read_seed_file(path, max_chars, doc_prefix, source, max_file_bytes)
        if fmt == "jsonl":
            return read_jsonl_file(path, max_chars, max_file_bytes)
        if fmt == "csv":
            return read_csv_file(path, max_chars, max_file_bytes)
        if fmt != "unknown":  # reference-manager and paper-site formats (rag_bot/reading/formats/)
            from rag_bot.reading.formats import is_json, read_reference_file

            result = ReadResult()
            text = read_corpus_text(path, result, max_file_bytes)
            if text is None:
                return result
            if fmt == "json" and file_suffix(path) == ".txt" and not is_json(text):
                # A seed file whose first abstract starts with "[1]" or "[Background]" looks like JSON to `sniff`.
                return read_seed_file(path, max_chars, doc_prefix, source, max_file_bytes)
            got = read_reference_file(path, fmt, text, max_chars)
            got.problems[:0] = result.problems
            return got
    except OSError as exc:
        return ReadResult(problems=[Problem(path=str(path), message=f"cannot read ({exc.strerror})")])
    return ReadResult(
        problems=[Problem(path=str(path), message=f"unknown file type; expected one of {', '.join(SUFFIXES)}")]
    )


def _expand(path: Path) -> list[Path | Problem]:
    """The corpus files a path names (a folder: its corpus files, sorted by name), or its problem."""
    if path.is_dir():
        # Entries named like corpus files that are no regular file (FIFOs, devices, dangling links, links to
        # them) are reported by `read_file` and skipped; folders named `*.txt` are only walked into.
        files = sorted(
            p for p in path.rglob("*") if not p.name.startswith(".") and file_suffix(p) in SUFFIXES and not p.is_dir()
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
    path: Path, max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS, doc_prefix: str | None = None, source: str | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> Iterator[Paper | Problem]:
    """One corpus file's papers and problems as they are read: JSON Lines as a stream, other files (seed and CSV
    files, small) read whole by `read_file`."""
    fmt = file_format(path)
    if fmt != "jsonl":
        result = read_file(path, max_chars, doc_prefix, source, fmt, max_file_bytes)
        yield from result.problems
        yield from result.papers
        return
    try:
        yield from iter_jsonl(path, max_chars, max_file_bytes)
    except OSError as exc:
        yield Problem(path=str(path), message=f"cannot read ({exc.strerror or exc})")


class PaperStream(list[Paper]):
    """The papers of some files, read again from the files each time it is iterated (never all held): what
    `scan_paths` gives as `ReadResult.papers`. `len()` is the number of papers the scan found; it cannot be
    indexed. A file that changed since the scan is read as it is now."""

    def __init__(self, plan: list[tuple[Path, str | None, str | None] | Problem], max_chars: int, count: int,
                 max_file_bytes: int = MAX_FILE_BYTES) -> None:
        super().__init__()
        self._plan = plan
        self._max_chars = max_chars
        self._max_file_bytes = max_file_bytes
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
            for got in iter_file(path, self._max_chars, prefix, source, self._max_file_bytes):
                if isinstance(got, Paper) and got.doc_id not in ids:
                    ids.add(got.doc_id)
                    yield got

    def __getitem__(self, index: object) -> Paper:  # type: ignore[override]
        raise TypeError("a PaperStream is read in order; iterate over it")

    def __repr__(self) -> str:
        return f"PaperStream({self._count} papers)"


def _read(paths: Iterable[Path], max_chars: int, keep: bool, max_file_bytes: int) -> ReadResult:
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
        known = file_suffix(path) in SUFFIXES or file_format(path) != "unknown"
        one = ReadResult(files=1 if known and file_problem(path, max_file_bytes) is None else 0)  # a FIFO: no file
        for got in iter_file(path, max_chars, prefix, source, max_file_bytes):
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
    result.papers = kept if keep else PaperStream(plan, max_chars, count, max_file_bytes)
    log.info("read %d papers from %d files (%d problems)", count, result.files, len(result.problems))
    for problem in result.problems:
        log.debug("input problem: %s", problem)
    return result


def seed_files(paths: Iterable[Path], max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS) -> Iterator[tuple[Path, list[Paper]]]:
    """The seed files the paths name, each with its papers: a seed paper's id comes from its file's name, so an
    ingest can tell which stored papers a file of the same name, read before, would see replaced."""
    for item in _plan(paths):
        if isinstance(item, Problem) or file_suffix(item[0]) != ".txt":
            continue
        path, prefix, source = item
        papers = read_file(path, max_chars, prefix, source).papers  # a .txt may hold BibTeX or JSON: their own ids
        yield path, [p for p in papers if p.doc_id.startswith(f"{prefix or path.stem}#")]


def read_paths(paths: Iterable[Path], max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
               max_file_bytes: int = MAX_FILE_BYTES) -> ReadResult:
    """All papers in the given files and folders (folders: their corpus files, sorted by name); a file named twice
    is read once. Seed files sharing a stem get distinct ids by `seed_names`. A file over `max_file_bytes` (a
    gzip file: unpacked) is reported and not read."""
    return _read(paths, max_chars, keep=True, max_file_bytes=max_file_bytes)


def scan_paths(paths: Iterable[Path], max_chars: int = DEFAULT_MAX_ABSTRACT_CHARS,
               max_file_bytes: int = MAX_FILE_BYTES) -> ReadResult:
    """As `read_paths`, but holding no paper: the files are read once for their problems and the number of papers,
    and `papers` is a `PaperStream` that reads them again as it is iterated (an ingest of any size in bounded
    memory)."""
    return _read(paths, max_chars, keep=False, max_file_bytes=max_file_bytes)
