"""`rag-bot ask`: one question, several, or a batch file; the answer streamed, as text or as JSON, with its references."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

from rag_bot import answer_words as words
from rag_bot.errors import EmptyQuestionError, NoIndexError, QuestionError, StoreError
from rag_bot.question import checked_question, clean_question
from rag_bot.reading.files import ANSI_ESCAPE, clean_text
from rag_bot.settings import Settings
from rag_bot.surfaces.cli_common import (
    BadFlag,
    fail,
    filters_from_args,
    print_answer,
    print_sources,
)

if TYPE_CHECKING:
    from rag_bot.engine import Engine
    from rag_bot.types import Answer, Filters, Mode
    from rag_bot.writing.references import Format

log = logging.getLogger(__name__)


def _questions(args: argparse.Namespace) -> list[str]:
    """The question, or the non-blank lines of the batch (a line that is not UTF-8 is reported and skipped);
    `BadFlag` when the batch holds no question at all."""
    if not args.batch:
        return [" ".join(args.question)]
    if args.batch == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(args.batch, "rb") as stream:
            data = stream.read()
    where = "standard input" if args.batch == "-" else args.batch
    questions = []
    lines = data.splitlines()
    for lineno, raw in enumerate(lines, start=1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            print(f"rag-bot: {where}, line {lineno}: not valid UTF-8 (byte 0x{raw[exc.start]:02x}); skipped",
                  file=sys.stderr)
            continue
        if _visible(line):  # a line of only NULs, a byte-order mark or zero-width spaces holds no question
            questions.append(line)
    if not questions:
        skipped = f"{len(lines)} line{'' if len(lines) == 1 else 's'} skipped"
        raise BadFlag(f"no question in {where} ({skipped}); put one question per line")
    return questions


def _visible(text: str) -> bool:
    return bool(clean_question(text))


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    """Answer one question, or one per line of a batch file, with citations."""
    if args.batch and args.question:
        return fail("give either a question or --batch FILE, not both", 2)
    try:
        questions = _questions(args)
    except OSError as exc:
        return fail(f"cannot read {args.batch}: {exc.strerror}", 2)
    if not args.batch:
        try:  # before the engine loads: a question it would refuse is refused at once
            checked_question(questions[0])
        except EmptyQuestionError:
            return fail("the question is empty; try: rag-bot ask \"what does the collection say about X?\"", 2)
        except QuestionError as exc:
            return fail(str(exc), 2)
    try:
        questions[0].encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 on the command line arrive as lone surrogates
        return fail("the question is not valid UTF-8 text; check the terminal's encoding", 2)
    filters = filters_from_args(args)
    from rag_bot.engine import Engine

    engine = Engine(settings)
    engine.require_index()
    failed = 0
    for n, question in enumerate(questions, start=1):
        try:
            if args.stream and not args.json:
                answer = _stream_answer(engine, question, args.mode, sys.stdout, filters)
            else:  # --json keeps standard output one JSON object per question, so nothing is streamed there
                answer = engine.ask(question, mode=args.mode, filters=filters)
        except BrokenPipeError:
            raise
        except Exception as exc:
            if not args.batch:
                raise  # one question: `main` reports it
            # A batch goes on (a Chroma server that went away may come back): one line per failed question.
            failed += 1
            message = _batch_failure(exc)
            print(f"rag-bot: question {n} of {len(questions)} failed: {message}", file=sys.stderr, flush=True)
            if args.json:
                print(json.dumps({"question": clean_question(question), "error": message}, ensure_ascii=False),
                      flush=True)
            elif args.stream:
                print(flush=True)  # end the half-written answer's line
            continue
        if answer.notice:
            print(f"rag-bot: {answer.notice}", file=sys.stderr, flush=True)
        references = _references(engine, answer, args.cite) if args.cite else None
        if args.json:
            obj = answer.to_json()
            if references is not None:
                obj["references"] = references
            print(json.dumps(obj, ensure_ascii=False), flush=True)
        else:
            if not args.stream:
                print_answer(answer, sys.stdout)
            if references:
                print(f"\nReferences ({args.cite}):\n{references}", end="", flush=True)
        if len(questions) > 1 and not args.json:
            print("\n---\n")
    return 1 if failed else 0


def _batch_failure(exc: Exception) -> str:
    """The one line a batch prints for a question that failed (the traceback goes to DEBUG logging)."""
    if isinstance(exc, StoreError | NoIndexError | QuestionError):
        return str(exc)
    log.debug("unexpected error", exc_info=True)
    return f"unexpected error ({type(exc).__name__}); run with RAG_BOT_LOG_LEVEL=DEBUG for details"


def _references(engine: Engine, answer: Answer, fmt: Format) -> str:
    """The answer's cited papers as BibTeX, RIS or CSL-JSON."""
    from rag_bot.writing.references import cited_papers, export

    return export(cited_papers([answer], engine.papers), fmt)  # type: ignore[arg-type]


# An escape sequence split across two pieces of a streamed answer is held back until it ends, at most this many
# characters: a colour code is under 20, a window title as long as a line; a longer "sequence" is shown cleaned.
MAX_HELD_ESCAPE = 256


class TerminalText:
    """Pieces of streamed text as the terminal may show them (`clean_text`: no escape sequence or control
    character), an escape sequence split across pieces held back until its end so that none of it is shown."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        """The part of the text so far that can be shown now."""
        text = self._held + piece
        start = max(text.rfind("\x1b"), text.rfind("\x9b"))
        if start >= 0 and len(text) - start <= MAX_HELD_ESCAPE and not _ended(text[start:]):
            text, self._held = text[:start], text[start:]
        else:
            self._held = ""
        return clean_text(text)

    def close(self) -> str:
        """What is still held, cleaned (the stream ended inside an escape sequence)."""
        text, self._held = self._held, ""
        return clean_text(text)


def _ended(tail: str) -> bool:
    """Whether the escape sequence `tail` starts with is complete: a CSI one (`ESC [`) needs its final byte, an OSC
    one (`ESC ]`) its BEL or ST."""
    match = ANSI_ESCAPE.match(tail)
    if match is None:
        return False
    if tail.startswith("\x1b]"):
        return match.group().endswith(("\x07", "\x1b\\"))
    return not tail.startswith("\x1b[") or match.end() > 2  # else only `ESC [` matched, as a two-character escape


def _stream_answer(engine: Engine, question: str, mode: Mode | None, out: TextIO,
                   filters: Filters | None = None) -> Answer:
    """Print the answer's text as it is written, then its sources; returns the final `Answer`."""
    from rag_bot.types import Answer

    shown: list[str] = []
    answer: Any = None
    terminal = TerminalText()
    for event in engine.stream(question, mode=mode, filters=filters):
        if isinstance(event, Answer):
            answer = event
        else:
            shown.append(event)
            out.write(terminal.feed(event))
            out.flush()
    out.write(terminal.close())
    text = "".join(shown).strip()
    if text != answer.answer:
        # The model failed mid-answer and the offline composer answered instead: the checked answer is what counts.
        out.write("\n\n---\n" if text else "")
        out.write(clean_text(answer.answer))
    out.write("\n")
    if answer.searched_for:
        out.write("\n" + words.SEARCHED_FOR.format(question=clean_text(answer.searched_for)) + "\n")
    print_sources(answer, out)
    out.flush()
    return answer
