"""The `rag-bot` command line: ingest, ask, serve, stats."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from rag_bot.errors import EmptyQuestionError, NoIndexError, StoreError
from rag_bot.logs import configure_logging
from rag_bot.settings import Settings, SettingsError, get_settings

log = logging.getLogger(__name__)


def _print_answer(answer: Any, out: TextIO) -> None:
    out.write(answer.answer + "\n")
    _print_sources(answer, out)


def _print_sources(answer: Any, out: TextIO) -> None:
    if answer.citations:
        out.write("\nSources:\n")
        for c in answer.citations:
            out.write(f"[{c.n}] {c.title} ({c.doc_id}, {c.source})\n    “{c.quote}”\n")


def _fail(message: str, code: int = 1) -> int:
    print(f"rag-bot: {message}", file=sys.stderr)
    return code


def _unreadable(path: Path, typed: str) -> str | None:
    """Why a path given to `ingest` (`typed` as the user wrote it) cannot be read; None when it can."""
    if not path.exists():
        return f"no such file or folder: {typed}"
    try:
        if path.is_dir():
            os.listdir(path)
        else:
            with open(path, "rb"):
                pass
    except OSError as exc:
        return f"cannot read {typed}: {exc.strerror or exc}"
    return None


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    """Index the given files and folders (default: the seeds folder)."""
    if args.reembed:
        return _reembed(args, settings)
    paths = [Path(p) for p in args.paths] or [settings.seed_path()]
    # Every path is checked before anything is written: a mistyped one must not cost a rebuild (or a prune) its store.
    for typed, path in zip(args.paths or [str(paths[0])], paths):
        problem = _unreadable(path, typed)
        if problem:
            return _fail(f"{problem}; nothing was changed (check the path and run the same command again)", 2)
        if args.rebuild and not settings.chroma_url and path.absolute().is_relative_to(settings.storage.absolute()):
            return _fail(f"{typed} is inside the store folder {settings.storage}, which --rebuild moves aside; "
                         f"move it out of there first; nothing was changed", 2)
    from tqdm import tqdm

    from rag_bot.engine import Engine

    if args.rebuild:
        from rag_bot.corpus import scan_paths
        from rag_bot.repair import rebuild_store

        # A rebuild sets a store aside: only for sources that give papers back (an empty folder, a damaged file
        # or /dev/null would leave an empty store in place of a healthy one).
        scan = scan_paths(paths, max_chars=settings.max_abstract_chars)
        if not scan.papers:
            for read_problem in scan.problems:
                print(f"warning: {read_problem}", file=sys.stderr)
            return _fail("no paper could be read from these paths, so the store was not rebuilt; nothing was "
                         "changed (give the sources of the collection)", 2)
        print(f"Rebuilding the store: {rebuild_store(settings)}.", file=sys.stderr)
    engine = Engine(settings)
    bar: Any = None

    def on_read(result: Any) -> None:
        nonlocal bar
        for problem in result.problems:
            print(f"warning: {problem}", file=sys.stderr)
        bar = tqdm(total=len(result.papers), unit="paper", desc="Indexing", disable=args.quiet, file=sys.stderr)

    report, result = engine.ingest(paths, prune=args.prune, progress=lambda n: bar.update(n), on_read=on_read)
    if bar is not None:
        bar.close()
    if args.prune and (result.problems or not result.papers):
        why = "some input could not be read" if result.problems else "no paper was read"
        print(f"warning: --prune was skipped because {why}", file=sys.stderr)
    print(f"Read {len(result.papers)} papers from {result.files} files: {report}. "
          f"The index holds {engine.index.count()} papers.")
    if not result.papers and result.problems:
        return 1
    return 0


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
    from rag_bot.engine import clean_question

    return bool(clean_question(text))


def _reembed(args: argparse.Namespace, settings: Settings) -> int:
    """`ingest --reembed`: move the stored collection to the model the settings choose (rag_bot/reembed.py)."""
    if args.paths or args.prune or args.rebuild:
        return _fail("--reembed reads the papers from the store: give it no paths, --prune or --rebuild", 2)
    from tqdm import tqdm

    from rag_bot.reembed import reembed

    bar: Any = None

    def on_start(total: int) -> None:
        nonlocal bar
        bar = tqdm(total=total, unit="paper", desc="Re-embedding", disable=args.quiet, file=sys.stderr)

    try:
        moved, said = reembed(settings, progress=lambda n: bar.update(n), on_start=on_start)
    finally:
        if bar is not None:
            bar.close()
    print(f"Moved {moved} papers: {said}.")
    return 0


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    """Answer one question, or one per line of a batch file, with citations."""
    if args.batch and args.question:
        return _fail("give either a question or --batch FILE, not both", 2)
    try:
        questions = _questions(args)
    except OSError as exc:
        return _fail(f"cannot read {args.batch}: {exc.strerror}", 2)
    if not args.batch and not _visible(questions[0]):
        return _fail("the question is empty; try: rag-bot ask \"what does the collection say about X?\"", 2)
    try:
        questions[0].encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 on the command line arrive as lone surrogates
        return _fail("the question is not valid UTF-8 text; check the terminal's encoding", 2)
    filters = _filters(args)
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
                from rag_bot.engine import clean_question

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
                _print_answer(answer, sys.stdout)
            if references:
                print(f"\nReferences ({args.cite}):\n{references}", end="", flush=True)
        if len(questions) > 1 and not args.json:
            print("\n---\n")
    return 1 if failed else 0


def _batch_failure(exc: Exception) -> str:
    """The one line a batch prints for a question that failed (the traceback goes to DEBUG logging)."""
    if isinstance(exc, StoreError | NoIndexError | EmptyQuestionError):
        return str(exc)
    log.debug("unexpected error", exc_info=True)
    return f"unexpected error ({type(exc).__name__}); run with RAG_BOT_LOG_LEVEL=DEBUG for details"


def _references(engine: Any, answer: Any, fmt: str) -> str:
    """The answer's cited papers as BibTeX, RIS or CSL-JSON."""
    from rag_bot.references import cited_papers, export

    return export(cited_papers([answer], engine.papers), fmt)  # type: ignore[arg-type]


class BadFlag(ValueError):
    """A flag's value cannot be used; `main` prints it as one line and exits with status 2."""


def _filters(args: argparse.Namespace) -> Any:
    """The --venue/--year/--author/--source flags as `Filters` (None when none is given); `BadFlag` if bad."""
    from rag_bot.types import Filters

    try:
        return Filters.parse(venue=args.venue, year=args.year, author=args.author, source=args.source)
    except ValueError as exc:
        raise BadFlag(str(exc)) from None


def _add_filter_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--venue", help="only papers of this venue (part of the name, any case), e.g. ICML")
    p.add_argument("--year", help="only papers of this year or range: 2026, 2024-2026, 2024-, -2023")
    p.add_argument("--author", help="only papers with an author whose name contains this (any case)")
    p.add_argument("--source", help="only papers from a source file whose name contains this")


def _stream_answer(engine: Any, question: str, mode: str | None, out: TextIO, filters: Any = None) -> Any:
    """Print the answer's text as it is written, then its sources; returns the final `Answer`."""
    from rag_bot.types import Answer

    shown: list[str] = []
    answer: Any = None
    for event in engine.stream(question, mode=mode, filters=filters):
        if isinstance(event, Answer):
            answer = event
        else:
            shown.append(event)
            out.write(event)
            out.flush()
    text = "".join(shown).strip()
    if text != answer.answer:
        # The model failed mid-answer and the offline composer answered instead: the checked answer is what counts.
        out.write("\n\n---\n" if text else "")
        out.write(answer.answer)
    out.write("\n")
    _print_sources(answer, out)
    out.flush()
    return answer


EXPORT_FORMATS = {".bib": "bibtex", ".ris": "ris", ".json": "csl"}  # by the file's extension, unless --format


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    """Write the collection (or the papers the filters pass) as BibTeX, RIS or CSL-JSON, which `rag-bot ingest`
    reads back into the same papers; or the whole store (papers, metadata, vectors) as one portable file."""
    from rag_bot.engine import Engine
    from rag_bot.portable import export_collection

    path = Path(args.file)
    fmt = args.format or EXPORT_FORMATS.get(path.suffix.lower(), "portable")
    try:
        filters = _filters(args)
    except BadFlag as exc:
        return _fail(str(exc), 2)
    if filters is not None and fmt == "portable":
        return _fail("the filters choose papers for --format bibtex, ris or csl; a portable file holds the whole "
                     "store", 2)
    if path.exists() and not args.force:
        return _fail(f"{path} exists; give another name or --force to overwrite it", 2)
    engine = Engine(settings)
    engine.require_index()
    try:
        if fmt != "portable":
            from rag_bot.references import export

            papers = [p for p in engine.papers.values() if filters is None or filters.matches(p)]
            if not papers:
                return _fail("no paper passes these filters; nothing written", 1)
            path.write_text(export(papers, fmt), encoding="utf-8")  # type: ignore[arg-type]
            print(f"Wrote {len(papers)} papers to {path} ({fmt}).")
            return 0
        counts = export_collection(engine.index, path)
    except OSError as exc:
        return _fail(f"cannot write {path}: {exc.strerror or exc}")
    print(f"Wrote {counts['papers']} papers and {counts['chunks']} chunks to {path}.")
    return 0


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    """Load a portable collection file into the store, embedding nothing."""
    from rag_bot.engine import Engine
    from rag_bot.portable import import_collection

    path = Path(args.file)
    if not path.is_file():
        return _fail(f"no such file: {path}", 2)
    engine = Engine(settings)
    try:
        counts = import_collection(engine.index, path)
    except ValueError as exc:  # the file is not sound: nothing was written
        return _fail(f"{exc}; nothing was imported", 2)
    replaced = f" ({counts['replaced']} replaced)" if counts.get("replaced") else ""
    print(f"Imported {counts['papers']} papers{replaced} and {counts['chunks']} chunks from {path}. "
          f"The index holds {engine.index.count()} papers.")
    return 0


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    """Print the size and place of the index."""
    from rag_bot.engine import Engine

    stats = Engine(settings).stats()
    if args.json:
        print(json.dumps(stats))
    else:
        print(f"{stats['papers']} papers, {stats['chunks']} chunks in the {stats['store']}")
        print(f"embedding: {stats['embedding']}")
        for source, n in stats["sources"].items():
            print(f"  {source}: {n}")
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """Check the store: exit 0 when healthy, else 1 with the fix."""
    from rag_bot.index import PaperIndex, store_label

    print(f"store: {store_label(settings)}")
    try:
        index = PaperIndex(settings)
        health = index.health()
    except StoreError as exc:
        print(f"problem: {exc}")
        return 1
    print(f"papers: {health.papers}, chunks: {health.chunks}, embedding: {index.index_version}")
    problems = []
    if health.orphan_chunks:
        problems.append(f"{health.orphan_chunks} chunks belong to no paper (an interrupted or failed ingest)")
    if health.papers_without_chunks:
        shown = ", ".join(health.papers_without_chunks[:5])
        more = "" if len(health.papers_without_chunks) <= 5 else ", ..."
        problems.append(f"{len(health.papers_without_chunks)} papers have no chunks ({shown}{more})")
    if health.stale:
        problems.append(f"{health.stale} papers were indexed with another model or chunking")
    # Records no ingest rewrites (their fingerprints match the sources): fixed by a sound import or a rebuild.
    broken = []
    if health.unreadable:
        shown = "; ".join(f"{d}: {why}" for d, why in list(health.unreadable.items())[:5])
        more = "" if len(health.unreadable) <= 5 else "; ..."
        broken.append(f"{len(health.unreadable)} papers have metadata that cannot be read, so questions skip "
                      f"them ({shown}{more})")
    for name, dimension in health.wrong_dimension.items():
        shown = ", ".join(health.sample_ids.get(name, []))
        broken.append(f"every record of the {name} collection has {dimension}-dimensional vectors; the model makes "
                      f"{index.dimensions()} (e.g. {shown}), so every question fails")
    if not problems and not broken:
        print("healthy" if health.papers else "healthy (empty: run `rag-bot ingest`)")
        return 0
    for problem in problems + broken:
        print(f"problem: {problem}")
    if problems:
        print("fix: run `rag-bot ingest` with the same sources (it finishes what is missing); "
              "if that fails, run `rag-bot ingest --rebuild` to rebuild the store from the sources")
    if broken:
        print("fix: run `rag-bot ingest --rebuild` with the sources (the store is moved aside, never deleted), or "
              "import a sound file exported by this rag-bot into a new store "
              "(`rag-bot --storage NEW_FOLDER import FILE`); re-importing a sound file also replaces unreadable papers")
    return 1


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Run a labelled question set through the pipeline and print its metrics."""
    from rag_bot.engine import Engine
    from rag_bot.evaluate import DEFAULT_SET, evaluate, format_table, load_questions

    path = Path(args.set) if args.set else DEFAULT_SET
    try:
        questions = load_questions(path)
    except OSError as exc:
        return _fail(f"cannot read {path}: {exc.strerror}", 2)
    except ValueError as exc:
        return _fail(str(exc), 2)
    filters = _filters(args)
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
    from rag_bot.ui import serve

    serve(settings)
    return 0


def cmd_api(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the OpenAI-compatible API alone (/v1/models, /v1/chat/completions)."""
    from rag_bot.api import serve_api

    serve_api(settings, port=args.port)
    return 0


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the MCP tools (search_papers, ask, get_paper) over standard input and output."""
    from rag_bot.mcp_server import run_stdio

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
    _add_filter_flags(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser("export", help="write the collection as BibTeX, RIS or CSL-JSON (readable by `ingest`), or "
                       "the whole store (papers, metadata, vectors) as one portable file")
    p.add_argument("file", help="the file to write: .bib, .ris, .json (CSL-JSON), or e.g. icml2026.ragbot.jsonl.gz")
    p.add_argument("--format", choices=["bibtex", "ris", "csl", "portable"],
                   help="the file's format (default: by its extension; portable for any other)")
    p.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    _add_filter_flags(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import", help="load a portable collection file into the store (no embedding)")
    p.add_argument("file", help="a file written by `rag-bot export`")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("stats", help="size and place of the index")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("doctor", help="check the store (exit 1 with the fix when it is not healthy)")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("eval", help="score the pipeline on a labelled question set")
    p.add_argument("--set", help="JSONL question set (default: tests/data/dev_questions.jsonl)")
    p.add_argument("--retrieval", choices=["hybrid", "dense", "bm25"], help="retriever to evaluate")
    _add_filter_flags(p)
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
        return _fail(str(exc), 2)
    except Exception as exc:  # e.g. a .env file that cannot be read
        log.debug("settings", exc_info=True)
        return _fail(f"cannot read the settings ({type(exc).__name__}: {exc})".splitlines()[0], 2)
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
        return _fail(str(exc))
    except (EmptyQuestionError, BadFlag) as exc:
        return _fail(str(exc), 2)
    except KeyboardInterrupt:
        return _fail("interrupted; run the same command again to finish", 130)
    except Exception as exc:  # the last resort: one line for the user, the traceback at DEBUG
        log.debug("unexpected error", exc_info=True)
        return _fail(f"unexpected error ({type(exc).__name__}); run with RAG_BOT_LOG_LEVEL=DEBUG for details")


if __name__ == "__main__":
    sys.exit(main())
