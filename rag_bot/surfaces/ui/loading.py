"""The engine, built while the chat page is already served: `rag-bot serve` answers the page as soon as Gradio is
imported and the page is built, and imports llama-index and chromadb, opens the store (indexing the seeds on a
first start) and loads the lexical side in a background thread. Until then the status line says so; a question
waits for the engine (a surface holding the `PendingEngine` calls it as it would the `Engine`)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

log = logging.getLogger(__name__)

LOADING = "Loading the collection (the chat answers once it is ready)…"


class PendingEngine:
    """An `Engine` being built: its `settings` at once, every other attribute once it is ready (the caller waits;
    a build that failed raises its error)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.progress = LOADING
        self._ready = threading.Event()
        self._engine: Engine | None = None
        self._error: BaseException | None = None

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    def start(self, build: Callable[[PendingEngine], Engine], on_ready: Callable[[Engine], None],
              on_error: Callable[[BaseException], None]) -> threading.Thread:
        """Build the engine in a thread: `build(self)` returns it, `on_ready(engine)` runs before any waiting
        caller is let through; `on_error(exc)` when the build fails."""
        def run() -> None:
            try:
                engine = build(self)
                on_ready(engine)
                self._engine = engine
            except BaseException as exc:  # reported to every waiting caller and by on_error
                self._error = exc
                log.debug("building the engine failed", exc_info=True)
                on_error(exc)
            finally:
                self._ready.set()

        thread = threading.Thread(target=run, name="rag-bot-engine", daemon=True)
        thread.start()
        return thread

    def wait(self, timeout: float | None = None) -> Engine:
        """The engine, once built."""
        if not self._ready.wait(timeout):
            raise TimeoutError("the collection is still loading")
        if self._error is not None:
            raise self._error
        return cast("Engine", self._engine)  # set before `_ready` by every build that did not fail

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.wait(), name)
