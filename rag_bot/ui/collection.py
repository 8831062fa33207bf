"""The Collection tab: browse and search the papers, upload corpus files."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import gradio as gr

from rag_bot.corpus import SUFFIXES, ReadResult
from rag_bot.ui.base import Library, Shared
from rag_bot.ui.render import paper_table, upload_summary

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
    """The paper table with its search box, and the upload form with its summary."""

    def __init__(self, library: Library, shared: Shared) -> None:
        self.library = library
        self.engine = library.engine
        self.shared = shared

    def render(self) -> None:
        max_mb = self.engine.settings.max_upload_mb
        with gr.Tab("Collection", id="collection"):
            with gr.Row():
                self.query = gr.Textbox(placeholder="Search titles, ids, sources and abstracts", show_label=False,
                                        elem_id="search", scale=4)
                self.search_btn = gr.Button("Search", scale=1, elem_id="search-btn")
            self.table = gr.Dataframe(paper_table(self.library.papers), interactive=False, wrap=True,
                                      elem_id="papers-table", max_height=420)
            gr.Markdown(
                f"**Add papers**: seed `.txt` files (header line, abstracts separated by blank lines), "
                f"`.jsonl` / `.jsonl.gz` or `.csv` with `id,title,abstract` and optional "
                f"`venue,year,authors,url`; up to {max_mb} MB per file."
            )
            self.files = gr.File(file_count="multiple", file_types=[".txt", ".jsonl", ".gz", ".csv"],
                                 label="Corpus files", elem_id="upload")
            self.add = gr.Button("Add to the collection", variant="primary", elem_id="add")
            self.summary = gr.Markdown(elem_id="upload-summary")

    def register_events(self) -> Any:
        """Wire search and upload; returns the upload event (for panels that follow the collection)."""
        self.search_btn.click(self.search, [self.query], [self.table], api_name="search")
        self.query.submit(self.search, [self.query], [self.table], api_visibility="private")
        # A list: its order is the order of the /upload API's return values.
        outputs = [self.summary, self.table, self.shared.status, self.files]
        return self.add.click(self.add_files, [self.files], outputs, api_name="upload")

    def search(self, query: str) -> Any:
        return paper_table(self.library.papers, query or "")

    def add_files(self, files: list[str] | None, progress: gr.Progress = gr.Progress()) -> dict[Any, Any]:  # noqa: B008
        """Check and index uploaded files; report what was added, skipped and rejected."""
        if not files:
            raise gr.Error("Choose one or more files first (.txt, .jsonl, .jsonl.gz or .csv).")
        accepted: list[Path] = []
        rejected: list[str] = []
        for name in files:
            path = Path(name)
            why = check_upload(path, self.engine.settings.max_upload_mb)
            if why:
                rejected.append(f"{path.name}: {why}")
            else:
                accepted.append(path)
        total = 0
        done = 0

        def on_read(result: ReadResult) -> None:
            nonlocal total
            total = len(result.papers)
            progress(0, desc=f"Indexing {total} papers")

        def on_progress(n: int) -> None:
            nonlocal done
            done += n
            progress(done / max(total, 1), desc=f"Indexed {done} of {total} papers")

        start = time.perf_counter()
        counts = (0, 0, 0)
        if accepted:
            log.info("indexing %d uploaded file(s)", len(accepted))
            try:
                with self.library.lock:
                    report, result = self.engine.ingest(accepted, progress=on_progress, on_read=on_read)
                    self.library.refresh()
            except Exception as exc:
                log.exception("error indexing %s", [p.name for p in accepted])
                raise gr.Error(f"Could not index the files ({type(exc).__name__}: {exc}).") from None
            counts = (report.added, report.updated, report.unchanged)
            for problem in result.problems:
                where = f"{Path(problem.path).name}:{problem.line}" if problem.line else Path(problem.path).name
                rejected.append(f"{where}: {problem.message}")
            gr.Info(f"{report.added} papers added, {report.updated} updated.")
        elif rejected:
            gr.Warning("No file could be added; see the summary.")
        summary = upload_summary(*counts, files=len(accepted), seconds=time.perf_counter() - start,
                                 papers=len(self.library.papers), rejected=rejected)
        return {
            self.summary: summary,
            self.table: paper_table(self.library.papers),
            self.shared.status: self.library.status(),
            self.files: None,
        }
