"""What the panels share: the collection as the page shows it, and the components every panel may update."""

from __future__ import annotations

import atexit
import logging
import shutil
import signal
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from rag_bot.settings import store_label
from rag_bot.store.conversations import Conversations
from rag_bot.surfaces.collection_map import CollectionMap, empty_map, map_of
from rag_bot.surfaces.ui.render import loading_line, status_line
from rag_bot.types import Answer, Paper

if TYPE_CHECKING:
    from gradio.components import Component

    from rag_bot.engine import Engine
    from rag_bot.surfaces.ui.loading import PendingEngine

    PageEngine = Engine | PendingEngine  # the engine, or the `PendingEngine` that stands in while it is built

log = logging.getLogger(__name__)


class Library:
    """The engine and what the page shows of its collection (papers, map), refreshed after an upload."""

    def __init__(self, engine: PageEngine) -> None:
        # The engine, or a `PendingEngine` (loading.py) while `rag-bot serve` builds it: the page is built at
        # once from an empty collection, and `attach` fills it in when the engine is ready.
        self.engine: PageEngine = engine
        # Answers read the engine concurrently (an ingest's reload swaps the retriever's state atomically);
        # only ingests take this lock, so two uploads never interleave.
        self.ingest_lock = threading.Lock()
        # Conversation exports (one file per session, see `ChatPanel.write_export`), removed at exit and on SIGTERM.
        self.export_dir = Path(tempfile.mkdtemp(prefix="rag-bot-export-"))
        EXPORT_DIRS.append(self.export_dir)
        clean_on_sigterm()
        # Saved conversations (`conversations.sqlite3` in the data folder); sessions already told saving is off.
        self.conversations = Conversations(engine.settings.data_path())
        self.warned_unsaved: set[str] = set()
        self.papers: Mapping[str, Paper] = {}
        self.map: CollectionMap = empty_map()
        self.loaded = False
        if getattr(engine, "ready", True):
            self.refresh()

    def attach(self, engine: Engine) -> None:
        """The built engine (of a `PendingEngine`): its collection becomes the page's."""
        self.engine = engine
        self.refresh()

    def refresh(self) -> None:
        """Take the papers the engine holds (re-read by every ingest) and recompute the map."""
        # The engine's own mapping, not a copy: a stored collection's papers are decoded when first read
        # (rag_bot/retrieval/lexical/papers.py PaperRecords), and the page is built from the map, so a start decodes
        # none of them.
        self.papers = self.engine.papers
        # The map of this collection state is computed once and saved beside the store (rag_bot/surfaces/collection_map.py).
        self.map = map_of(self.engine.index, self.papers)
        self.loaded = True
        log.debug("collection view: %d papers", len(self.papers))

    def status(self, answer: Answer | None = None) -> str:
        """The status line: who wrote the last answer (else who will write), collection size and store; while
        the engine loads, what it is doing."""
        if not self.loaded:
            return loading_line(getattr(self.engine, "progress", ""), store_label(self.engine.settings))
        writer = answer.llm if answer is not None else self.engine.writer_name
        return status_line(writer, len(self.papers), store_label(self.engine.settings))


EXPORT_DIRS: list[Path] = []  # every Library's export folder


@atexit.register
def remove_exports() -> None:
    """Remove the export folders (at exit, and on SIGTERM)."""
    for folder in EXPORT_DIRS:
        shutil.rmtree(folder, ignore_errors=True)


def _terminate(signum: int, frame: FrameType | None) -> None:
    remove_exports()
    # Then end by the signal, as without this handler: a supervisor (systemd, docker) sees a SIGTERM stop, not
    # an exit status it may count as a failure.
    signal.signal(signum, signal.SIG_DFL)
    signal.raise_signal(signum)


def clean_on_sigterm() -> None:
    """Remove the export folders when a SIGTERM ends the process (the default handler would skip atexit).

    While it serves, uvicorn handles SIGTERM itself (a graceful shutdown); then it restores the handler it found
    and raises the signal again, and this one runs. Only in the main thread (signals are set there), and only when
    nothing else (a test runner, an app embedding the chat) has chosen a SIGTERM handler."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)


@dataclass
class Shared:
    """Components that live outside any one panel: the status line, the conversation (list of `Turn`) and the
    id of its saved copy (None until the first answer is saved)."""

    status: Component
    turns: Component
    conversation: Any = None  # a gr.State; None in panels tested without saved conversations


def owner_of(request: object) -> str:
    """Whose conversations a request sees: the logged-in user, "" when the chat has no logins."""
    name = getattr(request, "username", None)
    return name if isinstance(name, str) else ""
