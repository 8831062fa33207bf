"""The chat is served before the engine is built (rag_bot/surfaces/ui/loading.py): the page needs none of the
engine's heavy imports, is built from an empty collection while the engine loads, and fills in once it is ready;
a question waits for the engine."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from rag_bot.settings import Settings
from rag_bot.surfaces.ui.loading import PendingEngine


def test_the_chat_page_imports_none_of_the_engines_heavy_parts():
    code = ("import sys; import rag_bot.surfaces.ui.app, rag_bot.surfaces.ui.chat, rag_bot.surfaces.ui.collection; "
            "print(sorted(m for m in ('chromadb', 'llama_index', 'onnxruntime', 'bm25s') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_pending_engine_gives_its_settings_at_once_and_the_rest_when_built(tmp_path):
    settings = Settings(storage=tmp_path)
    pending = PendingEngine(settings)
    release, seen = threading.Event(), []

    class Built:
        papers = {"a": 1}

    def build(p: PendingEngine) -> Built:
        release.wait(30)
        return Built()

    pending.start(build, on_ready=lambda engine: seen.append(engine.papers), on_error=lambda exc: None)
    assert pending.settings is settings and not pending.ready
    with pytest.raises(TimeoutError):
        pending.wait(timeout=0.1)
    release.set()
    assert pending.papers == {"a": 1} and seen == [{"a": 1}] and pending.ready


def test_a_failed_build_reaches_every_caller(tmp_path):
    pending = PendingEngine(Settings(storage=tmp_path))
    errors: list[BaseException] = []

    def build(p: PendingEngine) -> None:
        raise OSError("disk on fire")

    pending.start(build, on_ready=lambda engine: None, on_error=errors.append).join(30)
    with pytest.raises(OSError, match="disk on fire"):
        pending.ask("anything")
    assert [str(e) for e in errors] == ["disk on fire"]


def test_the_page_is_built_while_the_engine_loads_and_filled_in_after(engine, tmp_path):
    from rag_bot.surfaces.ui.app import build_app
    from rag_bot.surfaces.ui.base import Library

    pending = PendingEngine(engine.settings)
    library = Library(pending)
    release = threading.Event()
    assert "Loading the collection" in library.status() and len(library.map) == 0
    app = build_app(pending, library)  # the engine is not built yet: the page must not wait for it
    assert app is not None and not pending.ready
    pending.start(lambda p: release.wait(30) and engine, on_ready=library.attach, on_error=lambda exc: None)
    release.set()
    pending.wait(30)
    assert library.loaded and len(library.papers) == len(engine.papers)
    assert f"**{len(engine.papers)}** papers indexed" in library.status()
