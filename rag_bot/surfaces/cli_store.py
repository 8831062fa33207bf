"""The CLI's store commands: `ingest` (and `--reembed`, `--rebuild`), `export` and `import`, `stats`, `doctor`."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.surfaces.cli_calibrate import calibrate_after_write
from rag_bot.surfaces.cli_common import (
    BadFlag,
    fail,
    filters_from_args,
    unreadable,
)

if TYPE_CHECKING:
    from tqdm import tqdm

    from rag_bot.engine import Engine
    from rag_bot.reading.corpus import ReadResult

log = logging.getLogger(__name__)


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    """Index the given files and folders (default: the seeds folder)."""
    if args.reembed:
        return _reembed(args, settings)
    if args.sentences:
        return _sentences(args, settings)
    paths = [Path(p) for p in args.paths] or [settings.seed_path()]
    # Every path is checked before anything is written: a mistyped one must not cost a rebuild (or a prune) its store.
    for typed, path in zip(args.paths or [str(paths[0])], paths):
        problem = unreadable(path, typed)
        if problem:
            return fail(f"{problem}; nothing was changed (check the path and run the same command again)", 2)
        if args.rebuild and not settings.chroma_url and path.absolute().is_relative_to(settings.storage.absolute()):
            return fail(f"{typed} is inside the store folder {settings.storage}, which --rebuild moves aside; "
                         f"move it out of there first; nothing was changed", 2)
    from tqdm import tqdm

    from rag_bot.engine import Engine

    if args.rebuild:
        from rag_bot.reading.corpus import scan_paths
        from rag_bot.store.repair import rebuild_store

        # A rebuild sets a store aside: only for sources that give papers back (an empty folder, a damaged file
        # or /dev/null would leave an empty store in place of a healthy one).
        scan = scan_paths(paths, max_chars=settings.max_abstract_chars)
        if not scan.papers:
            for read_problem in scan.problems:
                print(f"warning: {read_problem}", file=sys.stderr)
            return fail("no paper could be read from these paths, so the store was not rebuilt; nothing was "
                         "changed (give the sources of the collection)", 2)
        print(f"Rebuilding the store: {rebuild_store(settings)}.", file=sys.stderr)
    engine = Engine(settings)
    bar: Any = None

    def on_read(result: ReadResult) -> None:
        nonlocal bar
        for problem in result.problems:
            print(f"warning: {problem}", file=sys.stderr)
        for line in _replaced_by_name(engine, paths, settings.max_abstract_chars):
            print(f"warning: {line}", file=sys.stderr)
        bar = tqdm(total=len(result.papers), unit="paper", desc="Indexing", disable=args.quiet, file=sys.stderr)

    sentences: tqdm | None = None

    def on_sentences(n: int) -> None:  # RAG_BOT_SENTENCE_VECTORS=ingest: the written papers' sentences
        nonlocal sentences
        if sentences is None:
            bar.close()
            sentences = tqdm(unit="paper", desc="Sentences", disable=args.quiet, file=sys.stderr)
        sentences.update(n)

    report, result = engine.ingest(paths, prune=args.prune, progress=lambda n: bar.update(n), on_read=on_read,
                                   sentence_progress=on_sentences)
    for progress_bar in (bar, sentences):
        if progress_bar is not None:
            progress_bar.close()
    if args.prune and (result.problems or not result.papers):
        why = "some input could not be read" if result.problems else "no paper was read"
        print(f"warning: --prune was skipped because {why}", file=sys.stderr)
    print(f"Read {len(result.papers)} papers from {result.files} files: {report}. "
          f"The index holds {engine.index.count()} papers.")
    if not result.papers and result.problems:
        return 1
    _prepare(engine)
    calibrate_after_write(engine, changed=bool(report.written or report.removed))
    return 0


def _replaced_by_name(engine: Engine, paths: list[Path], max_chars: int) -> list[str]:
    """One line per seed file whose papers replace stored papers of another file of the same name: a seed paper's
    id is `<file stem>#<n>`, so `a/papers.txt` ingested after `b/papers.txt` takes its papers' ids. Said when none
    of the stored papers of those ids holds the same text (a file edited in place replaces some, not all)."""
    from rag_bot.reading.corpus import seed_files

    lines = []
    for path, papers in seed_files(paths, max_chars):
        stored = {p.doc_id: p for p in engine.index.papers_by_id([p.doc_id for p in papers])}
        ours = [p for p in papers if p.doc_id in stored and stored[p.doc_id].source == p.source]
        if ours and all(stored[p.doc_id].text != p.text for p in ours):
            ids = ", ".join(p.doc_id for p in ours[:5]) + (", ..." if len(ours) > 5 else "")
            lines.append(f"{path}: replaces {len(ours)} stored papers from an earlier file also named "
                         f"{ours[0].source} ({ids}): a text file's papers are named by its file name; to keep both, "
                         f"rename one file or ingest both in one command")
    return lines


def _prepare(engine: Engine) -> None:
    """Build the search index's lexical side after a write, so the next question does not wait for it."""
    if engine.index.count():
        started = time.perf_counter()
        engine.prepare()
        log.info("lexical side ready in %.1f s", time.perf_counter() - started)


def _sentences(args: argparse.Namespace, settings: Settings) -> int:
    """`ingest --sentences`: embed the sentences of every stored paper the sentence-vector cache lacks, so no
    answer waits for them (what RAG_BOT_SENTENCE_VECTORS=ingest does for the papers an ingest writes)."""
    if args.paths or args.prune or args.rebuild or args.reembed:
        return fail("--sentences works on the stored papers: give it no paths, --prune, --rebuild or --reembed", 2)
    from tqdm import tqdm

    from rag_bot.engine import Engine

    engine = Engine(settings)
    total = engine.index.count()
    if not total:
        return fail("the store holds no papers yet: ingest some first", 1)
    with tqdm(total=total, unit="paper", desc="Sentences", disable=args.quiet, file=sys.stderr) as bar:
        embedded = engine.embed_sentences(progress=bar.update)
    store = engine.sentences.store
    if store is None or store.failed:
        return fail("the sentence vectors could not be saved (see the warning above); answers compute them "
                     "as they need them", 1)
    print(f"Embedded the sentences of {embedded} papers ({total - embedded} had them already). "
          f"{store.count()} papers' sentence vectors are stored in {store.file.path}.")
    return 0


def _reembed(args: argparse.Namespace, settings: Settings) -> int:
    """`ingest --reembed`: move the stored collection to the model the settings choose (rag_bot/store/reembed.py)."""
    if args.paths or args.prune or args.rebuild:
        return fail("--reembed reads the papers from the store: give it no paths, --prune or --rebuild", 2)
    return reembed_with(settings, args.quiet)


def reembed_with(settings: Settings, quiet: bool = False) -> int:
    """Re-embed the stored collection with the settings' model, with progress, then calibrate when it needs it."""
    from tqdm import tqdm

    from rag_bot.store.reembed import reembed

    bar: Any = None

    def on_start(total: int) -> None:
        nonlocal bar
        bar = tqdm(total=total, unit="paper", desc="Re-embedding", disable=quiet, file=sys.stderr)

    try:
        moved, said = reembed(settings, progress=lambda n: bar.update(n), on_start=on_start)
    finally:
        if bar is not None:
            bar.close()
    print(f"Moved {moved} papers: {said}.")
    from rag_bot.engine import Engine

    calibrate_after_write(Engine(settings))
    return 0


EXPORT_FORMATS = {".bib": "bibtex", ".ris": "ris", ".json": "csl"}  # by the file's extension, unless --format


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    """Write the collection (or the papers the filters pass) as BibTeX, RIS or CSL-JSON, which `rag-bot ingest`
    reads back into the same papers; or the whole store (papers, metadata, vectors) as one portable file."""
    from rag_bot.engine import Engine
    from rag_bot.store.portable import export_collection

    path = Path(args.file)
    fmt = args.format or EXPORT_FORMATS.get(path.suffix.lower(), "portable")
    try:
        filters = filters_from_args(args)
    except BadFlag as exc:
        return fail(str(exc), 2)
    if filters is not None and fmt == "portable":
        return fail("the filters choose papers for --format bibtex, ris or csl; a portable file holds the whole "
                     "store", 2)
    if path.exists() and not args.force:
        return fail(f"{path} exists; give another name or --force to overwrite it", 2)
    engine = Engine(settings)
    engine.require_index()
    try:
        if fmt != "portable":
            from rag_bot.writing.references import export

            papers = [p for p in engine.papers.values() if filters is None or filters.matches(p)]
            if not papers:
                return fail("no paper passes these filters; nothing written", 1)
            path.write_text(export(papers, fmt), encoding="utf-8")  # type: ignore[arg-type]
            print(f"Wrote {len(papers)} papers to {path} ({fmt}).")
            return 0
        counts = export_collection(engine.index, path)
    except OSError as exc:
        return fail(f"cannot write {path}: {exc.strerror or exc}")
    print(f"Wrote {counts['papers']} papers and {counts['chunks']} chunks to {path}.")
    return 0


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    """Load a portable collection file into the store, embedding nothing."""
    from rag_bot.engine import Engine
    from rag_bot.store.portable import import_collection

    path = Path(args.file)
    if not path.is_file():
        return fail(f"no such file: {path}", 2)
    from tqdm import tqdm

    engine = Engine(settings)
    bars: list[tqdm] = []
    if not args.quiet:  # a million papers' file takes minutes to check and hours to write: both are shown
        print(f"Checking {path} ...", file=sys.stderr, flush=True)

    def on_checked(records: int) -> None:
        bars.append(tqdm(total=records, unit="record", desc="Importing", disable=args.quiet, file=sys.stderr))

    try:
        counts = import_collection(engine.index, path, progress=lambda n: bars[0].update(n), on_checked=on_checked)
    except ValueError as exc:  # the file is not sound: nothing was written
        return fail(f"{exc}; nothing was imported", 2)
    finally:
        for bar in bars:
            bar.close()
    replaced = f" ({counts['replaced']} replaced)" if counts.get("replaced") else ""
    print(f"Imported {counts['papers']} papers{replaced} and {counts['chunks']} chunks from {path}. "
          f"The index holds {engine.index.count()} papers.")
    _prepare(engine)
    return 0


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    """Print the size and place of the index."""
    from rag_bot.engine import Engine

    engine = Engine(settings)
    stats = engine.stats()
    # The model that made the vectors, which a command run without its settings must not hide (issue 37).
    where, mismatch = engine.index.recorded_model().where(), engine.index.embedder_mismatch()
    if args.json:
        print(json.dumps({**stats, "embedding_where": where, "embedding_mismatch": mismatch}))
    else:
        print(f"{stats['papers']} papers, {stats['chunks']} chunks in the {stats['store']}")
        print(f"embedding: {stats['embedding']}" + (f" ({where})" if where else ""))
        if mismatch:
            print(f"warning: {mismatch}")
        print(f"sentence vectors stored: {stats['sentence_vectors']} papers (answers embed the others' at their "
              f"first use; `rag-bot ingest --sentences` embeds them all)")
        for source, n in stats["sources"].items():
            print(f"  {source}: {n}")
    return 0


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    """Check the store: exit 0 when healthy, else 1 with the fix."""
    from rag_bot.store.chroma import store_label
    from rag_bot.store.index import PaperIndex
    print(f"store: {store_label(settings)}")
    try:
        index = PaperIndex(settings)
        health = index.health()
    except StoreError as exc:
        print(f"problem: {exc}")
        return 1
    for line in index.repaired:  # vector files a failed write damaged, put back when the store opened
        print(f"repaired: {line}")
    where = index.recorded_model().where() if not health.model_folder else ""  # a folder has its own line
    print(f"papers: {health.papers}, chunks: {health.chunks}, embedding: {index.stored_index_version()}"
          + (f" ({where})" if where else ""))
    if health.model_folder:
        print(f"model folder: {health.model_folder}")
    # Its fix is in its line: no ingest may write with this model.
    mismatch = [health.model_mismatch] if health.model_mismatch else []
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
    if health.misnamed_chunks:  # an import of an older rag-bot let a file take over another paper's chunk ids
        shown = ", ".join(health.misnamed_chunks[:5]) + ("" if len(health.misnamed_chunks) <= 5 else ", ...")
        broken.append(f"{len(health.misnamed_chunks)} chunks have an id naming another paper than the one they "
                      f"belong to ({shown}): that paper lost them")
    for name, dimension in health.wrong_dimension.items():
        shown = ", ".join(health.sample_ids.get(name, []))
        broken.append(f"every record of the {name} collection has {dimension}-dimensional vectors; the model makes "
                      f"{index.dimensions()} (e.g. {shown}), so every question fails")
    if not problems and not broken and not mismatch:
        print("healthy" if health.papers else "healthy (empty: run `rag-bot ingest`)")
        return 0
    for problem in mismatch + problems + broken:
        print(f"problem: {problem}")
    if problems:
        print("fix: run `rag-bot ingest` with the same sources (it finishes what is missing); "
              "if that fails, run `rag-bot ingest --rebuild` to rebuild the store from the sources")
    if broken:
        print("fix: run `rag-bot ingest --rebuild` with the sources (the store is moved aside, never deleted), or "
              "import a sound file exported by this rag-bot into a new store "
              "(`rag-bot --storage NEW_FOLDER import FILE`); re-importing a sound file also replaces unreadable papers")
    return 1
