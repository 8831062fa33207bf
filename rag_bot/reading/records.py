"""One record (a JSONL line, a CSV row, an entry of a BibTeX, RIS or JSON file) as a `Paper`, or its problem:
the required fields, their types, the least words an abstract has, a year that is a year, every field within its
limit (rag_bot/reading/limits.py), abstracts and titles cut to size at a sentence."""

from __future__ import annotations

import re
from pathlib import Path

from rag_bot.reading import limits
from rag_bot.reading.files import ReadResult, word_count
from rag_bot.settings import Settings
from rag_bot.text import derive_title, find_links, introduced_names
from rag_bot.types import Paper, Problem

MIN_RECORD_WORDS = 5
SENTENCE_END = re.compile(r"[.!?](?=\s)")

# A publication year: none predates the first scientific journal (1665); one past 2100 is a typo (99999, 20244).
YEARS = range(1665, 2101)
DEFAULT_MAX_ABSTRACT_CHARS: int = Settings.model_fields["max_abstract_chars"].default  # RAG_BOT_MAX_ABSTRACT_CHARS
JSON_TYPES = {list: "an array", dict: "an object", bool: "a boolean", int: "a number", float: "a number"}


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


def cut_abstract(text: str, max_chars: int, path: Path, lineno: int, result: ReadResult) -> str:
    """An abstract over `max_chars` characters (at most `limits.ABSTRACT_CHARS`, whatever the setting) cut (`_cut`),
    and reported: a huge record never blocks the ingest."""
    max_chars = min(max_chars, limits.ABSTRACT_CHARS)
    if len(text) <= max_chars:
        return text
    cut = _cut(text, max_chars)
    result.problems.append(Problem(path=str(path), line=lineno, message=f"abstract cut to {len(cut)} characters"))
    return cut


def _cut_title(text: str, path: Path, lineno: int, result: ReadResult) -> str:
    if len(text) <= limits.TITLE_CUT:
        return text
    cut = _cut(text, limits.TITLE_CUT)
    result.problems.append(Problem(path=str(path), line=lineno, message=f"title cut to {len(cut)} characters"))
    return cut


def make_paper(doc_id: str, text: str, source: str, title: str | None = None, **extra: object) -> Paper:
    """A `Paper` with its names, links and (if not given) a title derived from the text; the names and links within
    their limits (`limits.derived`)."""
    found = find_links(text)
    if extra.get("url"):
        found = list(dict.fromkeys([str(extra["url"]), *found]))
    names, links = limits.derived(introduced_names(text), found)
    return Paper(
        doc_id=doc_id,
        title=title or derive_title(text, names),
        text=text,
        source=source,
        aliases=names,
        links=links,
        **extra,  # type: ignore[arg-type]
    )


def by_line(result: ReadResult) -> ReadResult:
    """The result with its problems in the order of their lines (problems of the whole file last)."""
    result.problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return result


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
    title, abstract = (" ".join(str(record[key]).split()) for key in ("title", "abstract"))
    # Checked before anything is made of it: a field beyond any real one is skipped, never cut to fit.
    over = limits.text_problem(title, abstract)
    if over:
        result.problems.append(Problem(path=str(path), line=lineno, message=f"{over}; skipped"))
        return
    one = ReadResult()  # what is reported of a paper kept (cut fields, a year that is none)
    paper = make_paper(
        doc_id,
        cut_abstract(abstract, max_chars, path, lineno, one),
        path.name,
        title=_cut_title(title, path, lineno, one),
        venue=str(record["venue"]) if record.get("venue") else None,
        year=_year(record.get("year"), path, lineno, one),
        authors=[a.strip() for a in authors if a.strip()],
        url=str(record["url"]) if record.get("url") else None,
        identifiers=_identifiers(ids, record.get("doi")),
    )
    over = limits.paper_problem(paper)
    if over:
        result.problems.append(Problem(path=str(path), line=lineno, message=f"{over}; skipped"))
        return
    seen.add(doc_id)
    result.problems.extend(one.problems)
    result.papers.append(paper)


def _identifiers(given: dict[str, str], doi: object) -> dict[str, str]:
    """A record's identifiers (and a top-level `doi`) in rag_bot/reading/identity.py's spellings; unknown kinds dropped."""
    from rag_bot.reading import identity

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
