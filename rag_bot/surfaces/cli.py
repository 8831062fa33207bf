"""The `rag-bot` command line: ingest, ask, serve, stats."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from rag_bot.errors import NoIndexError, QuestionError, StoreError
from rag_bot.logs import configure_logging
from rag_bot.settings import Settings, SettingsError, get_settings
from rag_bot.surfaces.cli_ask import cmd_ask
from rag_bot.surfaces.cli_calibrate import cmd_calibrate
from rag_bot.surfaces.cli_common import (
    BadFlag,
    add_filter_flags,
    fail,
    filters_from_args,
)
from rag_bot.surfaces.cli_store import cmd_doctor, cmd_export, cmd_import, cmd_ingest, cmd_stats
from rag_bot.surfaces.cli_tune import add_tune_parser

log = logging.getLogger(__name__)


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Run a labelled question set through the pipeline and print its metrics."""
    from rag_bot.engine import Engine
    from rag_bot.evaluation.evaluate import DEFAULT_SET, evaluate, format_table, load_questions

    path = Path(args.set) if args.set else DEFAULT_SET
    try:
        questions = load_questions(path)
    except OSError as exc:
        return fail(f"cannot read {path}: {exc.strerror}", 2)
    except ValueError as exc:
        return fail(str(exc), 2)
    filters = filters_from_args(args)
    engine = Engine(settings)
    engine.require_index()
    metrics = evaluate(engine, questions, filters=filters)
    if args.json:
        print(json.dumps(metrics))
    else:
        print(f"{len(questions)} questions from {path} · retrieval: {settings.retrieval}\n")
        print(format_table(metrics))
    return 0


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the chat (ingesting the seeds first if the index is empty)."""
    from rag_bot.surfaces.ui import serve

    serve(settings)
    return 0


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the OpenAI-compatible API alone (/v1/models, /v1/chat/completions)."""
    from rag_bot.surfaces.api import serve_api

    serve_api(settings, port=args.port)
    return 0


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the MCP tools (search_papers, ask, get_paper) over standard input and output."""
    from rag_bot.surfaces.mcp_server import run_stdio

    run_stdio(settings)
    return 0


def _port(text: str) -> int:
    """A TCP port from 1 to 65535 (argparse's type for --port): a larger one would be taken modulo 65536."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1 to 65535)") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1 to 65535)")
    return port


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `rag-bot`."""
    parser = argparse.ArgumentParser(prog="rag-bot", description="Cited answers about research abstracts.")
    parser.add_argument("--storage", help="store folder (RAG_BOT_STORAGE)")
    parser.add_argument("--chroma-url", help="Chroma server http://host:port (RAG_BOT_CHROMA_URL)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="index corpus files (seed .txt, .jsonl, .jsonl.gz, .csv; BibTeX, RIS, "
                       "CSL-JSON, arXiv, OpenReview and Semantic Scholar exports)")
    p.add_argument("paths", nargs="*", help="files or folders (default: seeds/)")
    p.add_argument("--prune", action="store_true", help="drop stored papers that are not in these paths")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--reembed", action="store_true",
                   help="re-embed the stored collection with the model the settings choose (resumable; no paths)")
    p.add_argument("--sentences", action="store_true",
                   help="embed the sentences of every stored paper that lacks them, so no answer waits for them "
                        "(about 0.1 s a paper on two cores; resumable; no paths)")
    p.add_argument("--rebuild", action="store_true",
                   help="start a fresh store (for a damaged one): the store's files are moved aside to "
                        "<storage>.broken-<time>, never deleted (the saved conversations stay); with "
                        "RAG_BOT_CHROMA_URL the collections on the server are deleted and recreated; then the "
                        "paths are indexed")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("ask", help="answer a question with citations")
    p.add_argument("question", nargs="*", help="the question")
    p.add_argument("--json", action="store_true", help="print one JSON object per question")
    p.add_argument("--batch", metavar="FILE", help="one question per line ('-' for standard input)")
    p.add_argument("--mode", choices=["ask", "summary", "compare"], help="override the detected mode")
    p.add_argument("--stream", action="store_true", help="print the answer as it is written (with an LLM)")
    p.add_argument("--cite", choices=["bibtex", "ris", "csl"],
                   help="also print the cited papers as BibTeX, RIS or CSL-JSON (with --json: a `references` field)")
    add_filter_flags(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("export", help="write the collection as BibTeX, RIS or CSL-JSON (readable by `ingest`), or "
                       "the whole store (papers, metadata, vectors) as one portable file")
    p.add_argument("file", help="the file to write: .bib, .ris, .json (CSL-JSON), or e.g. icml2026.ragbot.jsonl.gz")
    p.add_argument("--format", choices=["bibtex", "ris", "csl", "portable"],
                   help="the file's format (default: by its extension; portable for any other)")
    p.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    add_filter_flags(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load a portable collection file into the store (no embedding)")
    p.add_argument("file", help="a file written by `rag-bot export`")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("stats", help="size and place of the index")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("doctor", help="check the store (exit 1 with the fix when it is not healthy)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("calibrate", help="fit the relevance decision to the store's embedding model (docs/eval.md)")
    p.set_defaults(func=cmd_calibrate)

    add_tune_parser(sub)

    p = sub.add_parser("eval", help="score the pipeline on a labelled question set")
    p.add_argument("--set", help="JSONL question set (default: tests/data/dev_questions.jsonl)")
    p.add_argument("--retrieval", choices=["hybrid", "dense", "bm25"], help="retriever to evaluate")
    add_filter_flags(p)
    p.add_argument("--json", action="store_true", help="print the metrics (and per-question rows) as JSON")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("serve", help="serve the chat on http://127.0.0.1:7860")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("api", help="serve the OpenAI-compatible API on http://127.0.0.1:8000/v1")
    p.add_argument("--port", type=_port, default=8000, help="port (default 8000; the address is RAG_BOT_HOST)")
    p.set_defaults(func=cmd_api)

    p = sub.add_parser("mcp", help="serve the MCP tools over stdio (for agents and MCP clients)")
    p.set_defaults(func=cmd_mcp)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rag-bot` console script."""
    args = build_parser().parse_args(argv)
    try:
        settings = get_settings(
            storage=args.storage, chroma_url=args.chroma_url, retrieval=getattr(args, "retrieval", None)
        )
    except SettingsError as exc:  # one line naming the variable, its value (masked if secret) and what is allowed
        return fail(str(exc), 2)
    except Exception as exc:  # e.g. a .env file that cannot be read
        log.debug("settings", exc_info=True)
        return fail(f"cannot read the settings ({type(exc).__name__}: {exc})".splitlines()[0], 2)
    configure_logging(settings.log_level)
    try:
        code = int(args.func(args, settings))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`rag-bot stats | head -1`): stop quietly like other Unix tools (128 + SIGPIPE).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (NoIndexError, StoreError) as exc:
        log.debug("stopped", exc_info=True)
        return fail(str(exc))
    except (QuestionError, BadFlag, SettingsError) as exc:  # SettingsError: a count grounding was not fitted with
        return fail(str(exc), 2)
    except KeyboardInterrupt:
        return fail("interrupted; run the same command again to finish", 130)
    except Exception as exc:  # the last resort: one line for the user, the traceback at DEBUG
        log.debug("unexpected error", exc_info=True)
        return fail(f"unexpected error ({type(exc).__name__}); run with RAG_BOT_LOG_LEVEL=DEBUG for details")


if __name__ == "__main__":
    sys.exit(main())
