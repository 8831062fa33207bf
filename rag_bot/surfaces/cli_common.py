"""What the CLI's commands share: printing an answer and its sources, a failure as one line, the filter flags."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from rag_bot import answer_words as words
from rag_bot.reading.files import clean_text

if TYPE_CHECKING:
    from rag_bot.types import Answer, Filters


def print_answer(answer: Answer, out: TextIO) -> None:
    """An answer as the CLI prints it: the text, its certainty, its sources."""
    if answer.searched_for:
        out.write(words.SEARCHED_FOR.format(question=clean_text(answer.searched_for)) + "\n\n")
    out.write(clean_text(answer.answer) + "\n")  # a model's (or an import's) terminal escapes never reach the terminal
    print_sources(answer, out)


def print_sources(answer: Answer, out: TextIO) -> None:
    """The answer's certainty in words, then its sources, each with its probability and quote."""
    out.write("\n" + words.certainty_line(answer.certainty) + "\n")
    if answer.citations:
        out.write("\nSources:\n")
        for c in answer.citations:
            probability = words.probability_text(c.probability)
            where = f"{c.doc_id}, {c.source}" + (f", {probability}" if probability else "")
            out.write(clean_text(f"[{c.n}] {c.title} ({where})\n    “{c.quote}”") + "\n")


def fail(message: str, code: int = 1) -> int:
    print(f"rag-bot: {message}", file=sys.stderr)
    return code


def unreadable(path: Path, typed: str) -> str | None:
    """Why a path given to `ingest` (`typed` as the user wrote it) cannot be read; None when it can."""
    if not path.exists():
        return f"no such file or folder: {typed}"
    try:
        if path.is_dir():
            os.listdir(path)
        elif stat.S_ISREG(path.stat().st_mode):
            # Only a regular file is opened here: opening a FIFO waits for a writer (the command would hang); the
            # reader reports any other kind as "not a regular file; skipped".
            with open(path, "rb"):
                pass
    except OSError as exc:
        return f"cannot read {typed}: {exc.strerror or exc}"
    return None


class BadFlag(ValueError):
    """A flag's value cannot be used; `main` prints it as one line and exits with status 2."""


def filters_from_args(args: argparse.Namespace) -> Filters | None:
    """The --venue/--year/--author/--source flags as `Filters` (None when none is given); `BadFlag` if bad."""
    from rag_bot.types import Filters

    try:
        return Filters.parse(venue=args.venue, year=args.year, author=args.author, source=args.source)
    except ValueError as exc:
        raise BadFlag(str(exc)) from None


def add_filter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--venue", help="only papers of this venue (part of the name, any case), e.g. ICML")
    p.add_argument("--year", help="only papers of this year or range: 2026, 2024-2026, 2024-, -2023")
    p.add_argument("--author", help="only papers with an author whose name contains this (any case)")
    p.add_argument("--source", help="only papers from a source file whose name contains this")
