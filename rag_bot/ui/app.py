"""The page: the panels put together (`build_app`), logins, upload checks, first indexing and `serve`."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from rag_bot.engine import Engine
from rag_bot.logs import configure_logging
from rag_bot.settings import Settings

log = logging.getLogger(__name__)

CSS = """
.status-line { font-size: 0.9em; opacity: 0.85; }
.sources-panel { max-height: 72vh; overflow-y: auto; }
.src-card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px;
            margin: 6px 0; scroll-margin: 12px; }
.src-card.flash { animation: src-flash 1.6s ease-out; }
@keyframes src-flash { from { background: #fff3b0; } to { background: transparent; } }
.src-n { font-weight: 700; margin-right: 4px; }
.src-title { font-weight: 600; }
.src-meta { font-size: 0.85em; opacity: 0.8; margin: 2px 0 4px; }
.src-abstract { font-size: 0.9em; line-height: 1.45; }
.src-abstract mark { background: #ffe58a; color: inherit; padding: 0 1px; }
a.cite { text-decoration: none; font-weight: 600; }
.turn-sources > summary { cursor: pointer; font-weight: 600; margin-top: 6px; }
"""

# A click on an inline [n] scrolls to (and flashes) its source card, opening the answer's section first.
HEAD = """
<script>
document.addEventListener("click", function (event) {
  var link = event.target && event.target.closest ? event.target.closest('a[href^="#src-"]') : null;
  if (!link) { return; }
  event.preventDefault();
  event.stopPropagation();
  var card = document.getElementById(link.getAttribute("href").slice(1));
  if (!card) { return; }
  var section = card.closest("details");
  if (section) { section.open = true; }
  card.scrollIntoView({behavior: "smooth", block: "nearest"});
  card.classList.remove("flash"); void card.offsetWidth; card.classList.add("flash");
}, true);
</script>
"""


def auth_pairs(value: str | None) -> list[tuple[str, str]] | None:
    """RAG_BOT_AUTH as Gradio logins: `user:password`, or a file of such lines (# comments allowed)."""
    if not value:
        return None
    path = Path(value).expanduser()
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else [value]
    pairs = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user.strip() or not password:
            raise ValueError("RAG_BOT_AUTH must be user:password or a file of user:password lines")
        pairs.append((user.strip(), password))
    if not pairs:
        raise ValueError(f"RAG_BOT_AUTH file {path} holds no user:password line")
    return pairs


def ensure_index(engine: Engine) -> None:
    """Index the seeds folder when the store is empty (first `make run`), with a progress bar on stderr."""
    if engine.index.count() > 0:
        return
    from tqdm import tqdm

    log.info("No index yet: indexing %s ...", engine.settings.seeds)
    bar: Any = None

    def on_read(result: Any) -> None:
        nonlocal bar
        for problem in result.problems:
            log.warning("%s", problem)
        bar = tqdm(total=len(result.papers), unit="paper", desc="Indexing", file=sys.stderr)

    engine.ingest([engine.settings.seeds], progress=lambda n: bar.update(n), on_read=on_read)
    if bar is not None:
        bar.close()


def build_app(engine: Engine) -> Any:
    """The chat page on an engine: a status line over three tabs (Chat with its sources, Collection, Map)."""
    import gradio as gr

    from rag_bot.ui.base import Library, Shared
    from rag_bot.ui.chat import ChatPanel
    from rag_bot.ui.collection import CollectionPanel
    from rag_bot.ui.map import MapPanel
    from rag_bot.ui.sources import SourcesPanel

    library = Library(engine)
    with gr.Blocks(title="rag-bot", analytics_enabled=False, fill_width=True) as app:
        gr.Markdown("## rag-bot · cited answers about research abstracts")
        shared = Shared(
            status=gr.Markdown(library.status(), elem_classes="status-line", elem_id="status"),
            turns=gr.State([]),
        )
        sources = SourcesPanel(library)
        chat = ChatPanel(library, sources, shared)
        collection = CollectionPanel(library, shared)
        cmap = MapPanel(library, shared)
        with gr.Tabs():
            with gr.Tab("Chat", id="chat"):
                with gr.Row():
                    with gr.Column(scale=3):
                        chat.render()
                    with gr.Column(scale=2):
                        sources.render()
            collection.render()
            cmap.render()

        for answered in chat.register_events():
            cmap.follow(answered)  # the map's highlights follow each answer
        cmap.refresh_legend(collection.register_events())
        cmap.register_events()
    return app


def serve(settings: Settings | None = None) -> None:
    """Index the seeds if needed, then serve the chat at http://host:port."""
    engine = Engine(settings)
    configure_logging(engine.settings.log_level)  # as `rag-bot serve` does (also for app.py at the root)
    try:
        auth = auth_pairs(engine.settings.auth)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    ensure_index(engine)
    engine.retriever  # load BM25 and names before the first question  # noqa: B018
    app = build_app(engine)
    print(f"rag-bot chat on http://{engine.settings.host}:{engine.settings.port}"
          f"{' (login required)' if auth else ''}", file=sys.stderr)
    app.queue(default_concurrency_limit=1).launch(
        server_name=engine.settings.host,
        server_port=engine.settings.port,
        show_error=False,
        auth=auth,
        auth_message="rag-bot: log in with the user and password from RAG_BOT_AUTH." if auth else None,
        max_file_size=f"{engine.settings.max_upload_mb}mb",
        css=CSS,
        head=HEAD,
        footer_links=["api"],
    )
