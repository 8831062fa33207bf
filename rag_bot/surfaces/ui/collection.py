"""The Collection tab: browse and search the papers, upload corpus files."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import gradio as gr
from gradio.components import Component
from gradio.events import Dependency
from gradio.utils import get_upload_folder

from rag_bot.reading.corpus import SUFFIXES, ReadResult
from rag_bot.surfaces.ui.base import Library, Shared
from rag_bot.surfaces.ui.render import TABLE_ROWS, paper_rows, paper_table, table_caption, upload_summary
from rag_bot.text import mask_credentials

if TYPE_CHECKING:
    from rag_bot.store.index import IngestReport

log = logging.getLogger(__name__)


def check_upload(path: Path, max_mb: int) -> str | None:
    """Why an uploaded file is refused (type or size), or None."""
    name = path.name.lower()
    if not any(name.endswith(s) for s in SUFFIXES):
        return f"not a corpus file type (accepted: {', '.join(SUFFIXES)})"
    size = path.stat().st_size
    if size > max_mb * 1024 * 1024:
        return f"{size / 1024 / 1024:.1f} MB is over the {max_mb} MB limit"
    if size == 0:
        return "empty file"
    return None


class CollectionPanel:
    """The paper table with its search box, and the upload form with its summary. The table shows the first
    `table_rows` (`TABLE_ROWS`) papers (by source, then id) of the collection or of a search, the caption over it
    how many there are; the unsearched table comes from the collection map, so building the page decodes no paper."""

    def __init__(self, library: Library, shared: Shared, table_rows: int = TABLE_ROWS) -> None:
        self.library = library
        self.engine = library.engine
        self.shared = shared
        self.table_rows = table_rows

    def render(self) -> None:
        max_mb = self.engine.settings.max_upload_mb
        with gr.Tab("Collection", id="collection"):
            with gr.Row():
                self.query = gr.Textbox(placeholder="Search titles, ids, sources and abstracts", show_label=False,
                                        elem_id="search", scale=4)
                self.search_btn = gr.Button("Search", scale=1, elem_id="search-btn")
            rows = paper_rows(self.library.map, self.library.papers)
            self.caption = gr.Markdown(table_caption(len(rows), limit=self.table_rows), elem_id="papers-caption")
            self.table = gr.Dataframe(paper_table(self.library.map, rows, self.table_rows), interactive=False, wrap=True,
                                      elem_id="papers-table", max_height=420)
            # (papers found, query) of the table shown: a State, so the /search and /upload APIs still return
            # the table alone, and the caption follows it.
            self.found = gr.State((len(rows), ""))
            gr.Markdown(
                f"**Add papers**: seed `.txt` files (header line, abstracts separated by blank lines), "
                f"`.jsonl` / `.jsonl.gz` or `.csv` with `id,title,abstract` and optional "
                f"`venue,year,authors,url`; up to {max_mb} MB per file."
            )
            self.files = gr.File(file_count="multiple", file_types=[".txt", ".jsonl", ".gz", ".csv"],
                                 label="Corpus files", elem_id="upload")
            # Off by default: an upload never overwrites a paper someone else added under the same id (a planted
            # record, or a BibTeX `note = {rag-bot doc_id …}`); the uploader who means to replace says so here.
            self.replace = gr.Checkbox(False, label="Replace papers with the same id", elem_id="replace",
                                       info="Otherwise a paper whose id is already in the collection is kept "
                                            "as it is and the summary names it.")
            self.add = gr.Button("Add to the collection", variant="primary", elem_id="add")
            self.summary = gr.Markdown(elem_id="upload-summary")

    def register_events(self) -> Dependency:
        """Wire search and upload; returns the upload event (for panels that follow the collection)."""
        searched = [
            self.search_btn.click(self.search, [self.query], [self.table, self.found], api_name="search"),
            self.query.submit(self.search, [self.query], [self.table, self.found], api_visibility="private"),
        ]
        # A list: its order is the order of the /upload API's return values.
        outputs = [self.summary, self.table, self.shared.status, self.files, self.found]
        # Uploads queue on their own (one at a time), never in the answers' slots.
        uploaded = self.add.click(self.add_files, [self.files, self.replace], outputs, api_name="upload",
                                  concurrency_limit=1, concurrency_id="ingest")
        for event in [*searched, uploaded]:
            event.then(lambda found: table_caption(found[0], found[1], self.table_rows), [self.found], [self.caption],
                       api_visibility="private")
        return uploaded

    def refreshed(self) -> tuple[object, ...]:
        """The table, its caption and (papers found, query) of the collection as it is now."""
        rows = paper_rows(self.library.map, self.library.papers)
        return (paper_table(self.library.map, rows, self.table_rows), table_caption(len(rows), limit=self.table_rows),
                (len(rows), ""))

    def search(self, query: str | None) -> dict[Component, object]:
        """The table of the papers matching every word of the query (of every paper for an empty one), and
        (papers found, query) for its caption."""
        query = query or ""
        cmap = self.library.map
        rows = paper_rows(cmap, self.library.papers, query)
        return {self.table: paper_table(cmap, rows, self.table_rows), self.found: (len(rows), query)}

    def add_files(
        self, files: list[str] | None, replace: bool = False, progress: gr.Progress = gr.Progress()  # noqa: B008
    ) -> Iterator[dict[Component, object]]:
        """Check the uploaded files and index them in the background (`IngestJob`): the summary says
        "Indexing …" at once and counts up, answers keep coming from the committed collection meanwhile;
        the summary, table and status show the result when the ingest ends. Without `replace`, papers already
        stored under an uploaded record's id stay as they are."""
        if not files:
            raise gr.Error("Choose one or more files first (.txt, .jsonl, .jsonl.gz or .csv).")
        accepted: list[Path] = []
        rejected: list[str] = []
        for name in files:
            path = Path(name)
            why = check_upload(path, self.engine.settings.max_upload_mb)
            if why:
                rejected.append(f"{path.name}: {why}")
                remove_upload(path)
            else:
                accepted.append(path)
        start = time.perf_counter()
        counts = (0, 0, 0)
        notes: list[str] = []
        if accepted:
            log.info("indexing %d uploaded file(s)", len(accepted))
            job = IngestJob(self.library, accepted, replace=bool(replace))
            yield {self.summary: f"Indexing {len(accepted)} file(s)… the chat keeps answering from the "
                                 f"current collection meanwhile."}
            shown = (-1, -1)
            while not job.finished.wait(0.5):
                if (job.done, job.total) != shown and job.total:
                    shown = (job.done, job.total)
                    progress(job.done / job.total, desc=f"Indexed {job.done} of {job.total} papers")
                    yield {self.summary: f"Indexing {job.total} papers… {job.done} of {job.total} done."}
            if job.error is not None:
                raise gr.Error(f"Could not index the files ({type(job.error).__name__}: "
                               f"{mask_credentials(str(job.error))}).")
            report, result = job.report, job.result
            assert report is not None and result is not None
            counts = (report.added, report.updated, report.unchanged)
            for problem in result.problems:
                where = f"{Path(problem.path).name}:{problem.line}" if problem.line else Path(problem.path).name
                rejected.append(f"{where}: {problem.message}")
            rejected += [f"id {doc_id} is already in the collection; not replaced" for doc_id in report.not_replaced]
            if report.kept_apart:
                notes.append(f"{report.kept_apart} kept apart: same title/DOI as a stored paper but another text")
            gr.Info(f"{report.added} papers added, {report.updated} updated.")
        elif rejected:
            gr.Warning("No file could be added; see the summary.")
        summary = upload_summary(*counts, files=len(accepted), seconds=time.perf_counter() - start,
                                 papers=len(self.library.papers), rejected=rejected, notes=notes)
        yield {
            self.summary: summary,
            **self.search(""),
            self.shared.status: self.library.status(),
            self.files: None,
        }


def remove_upload(path: Path) -> None:
    """Delete an uploaded file (and its folder, if emptied) once read: only files in Gradio's upload folder."""
    try:
        folder = Path(get_upload_folder()).resolve()
        resolved = path.resolve()
        if folder not in resolved.parents:
            return
        resolved.unlink(missing_ok=True)
        if resolved.parent != folder and not any(resolved.parent.iterdir()):
            resolved.parent.rmdir()
    except OSError as exc:
        log.debug("could not remove the upload %s: %s", path.name, exc)


class IngestJob:
    """One upload's ingest, in a thread of its own: it finishes (and the uploaded files are removed) even if
    the page that started it is closed. Ingests run one at a time (`Library.ingest_lock`)."""

    def __init__(self, library: Library, paths: list[Path], replace: bool = False) -> None:
        self.library = library
        self.paths = paths
        self.replace = replace
        self.total = 0
        self.done = 0
        self.report: IngestReport | None = None
        self.result: ReadResult | None = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        threading.Thread(target=self._run, name="rag-bot-ingest", daemon=True).start()

    def _on_read(self, result: ReadResult) -> None:
        self.total = len(result.papers)

    def _on_progress(self, n: int) -> None:
        self.done += n

    def _run(self) -> None:
        try:
            with self.library.ingest_lock:
                self.report, self.result = self.library.engine.ingest(
                    self.paths, progress=self._on_progress, on_read=self._on_read, replace=self.replace
                )
                self.library.refresh()
        except Exception as exc:
            log.exception("error indexing %s", [p.name for p in self.paths])
            self.error = exc
        finally:
            for path in self.paths:
                remove_upload(path)
            self.finished.set()
