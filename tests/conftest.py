"""Shared fixtures: a real index of the seed abstracts, built once per test session in a temp folder."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
for _key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAG_BOT_CHROMA_URL", "RAG_BOT_STORAGE", "RAG_BOT_LLM"):
    os.environ.pop(_key, None)  # tests choose their own store and engine

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
SHARED = ROOT.parent / "shared"
# Issue 38 made bench/ a package: a shipped model fitted before names its script by the path it had then.
MOVED_BY_ISSUE_38 = {"bench/relevance_fit.py": "bench/fit/relevance.py", "bench/roles_fit.py": "bench/fit/roles.py",
                     "bench/themes_fit.py": "bench/fit/themes.py", "bench/problem_cell_fit.py": "bench/fit/problem_cell.py"}


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's cache folder (where a Chroma server's collection keeps its caches: rag_bot/store/caches.py), the
    session's own: tests leave nothing in the home folder."""
    folder = tmp_path_factory.mktemp("user-cache")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def seed_storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store folder holding the indexed seed abstracts."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    storage = tmp_path_factory.mktemp("seed-store")
    Engine(Settings(storage=storage)).ingest([SEEDS])
    return storage


@pytest.fixture(scope="session")
def engine(seed_storage: Path):
    """An engine over the seed index (shared: tests must not ingest into it)."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    return Engine(Settings(storage=seed_storage))


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(app: Any, make: Callable[[Any, str, int], Any] | None = None) -> Iterator[str]:
    """`app` on a real uvicorn server on a free loopback port, in a thread; yields its base URL
    ("http://127.0.0.1:PORT"); stopped on exit. `make(app, host, port)` builds the server (default: plain)."""
    import uvicorn

    port = free_port()
    server = (make(app, "127.0.0.1", port) if make else
              uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def json_stand_in(respond: Callable[[dict], tuple[int, Any]]) -> Iterator[str]:
    """A stand-in for a remote model API: a real HTTP server on loopback whose every POST of a JSON body is answered
    with `respond(body) -> (status, JSON payload)` (a `bytes` payload is sent as it is, as HTML: a proxy's error
    page); yields its base URL ("http://127.0.0.1:PORT")."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            status, payload = respond(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if isinstance(payload, bytes) else "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # Closing waits for the answers still being computed: a thread left inside onnxruntime when the interpreter
    # exits aborts the process.
    server.daemon_threads = False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def few_papers(tmp_path_factory) -> Path:
    """A JSONL file of three short papers (a slow model embeds them in a second)."""
    path = tmp_path_factory.mktemp("few") / "few.jsonl"
    rows = [{"title": "Sparse attention for long contexts", "abstract": "We hash keys to skip most attention work."},
            {"title": "Steering with sparse autoencoders", "abstract": "Features found by an autoencoder steer a "
             "language model away from harmful answers."},
            {"title": "Cheaper serving of language models", "abstract": "Batching and caching halve the cost."}]
    path.write_text("".join(json.dumps({"id": f"few-{n}"} | r) + "\n" for n, r in enumerate(rows)), encoding="utf-8")
    return path


def run_cli(storage: Path, *args: str, **env: str) -> Any:
    """The real `rag-bot` console script run as a user runs it, on `storage`, with the given RAG_BOT_ variables (and
    none from this process's environment); returns the finished `subprocess.CompletedProcess`."""
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    clean |= {"RAG_BOT_STORAGE": str(storage), "GRADIO_ANALYTICS_ENABLED": "False"} | env
    return subprocess.run([str(Path(sys.executable).parent / "rag-bot"), *args], capture_output=True, text=True,
                          timeout=300, env=clean, cwd=storage.parent, stdin=subprocess.DEVNULL)


def run_main(monkeypatch, capsys, storage: Path, *args: str, **env: str) -> tuple[int, str, str]:
    """`rag-bot` as run_cli runs it, but in this process through cli.main (an interpreter start costs 3-4 s on the
    CI runner): returns (exit code, stdout, stderr). For tests about what a command says; keep run_cli where what
    reaches a real terminal (no traceback, the exit status of the console script) is the point."""
    import logging

    from rag_bot.surfaces.cli import main

    for key in [k for k in os.environ if k.startswith(("RAG_BOT_", "OPENAI_"))]:
        monkeypatch.delenv(key)
    for key, value in ({"RAG_BOT_STORAGE": str(storage)} | env).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(storage.parent)  # the console script's working folder (where a .env would be read)
    # A log handler made by an earlier test writes to that test's stderr: main makes a fresh one on this one.
    monkeypatch.setattr(logging.getLogger("rag_bot"), "handlers", [])
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def paper_with(engine, fragment: str) -> str:
    """doc_id of the one paper that introduces the name (else whose abstract contains the fragment)."""
    from rag_bot.text import clean_markup

    papers = engine.papers.values()
    hits = [p.doc_id for p in papers if fragment in p.aliases] or [
        p.doc_id for p in papers if fragment in clean_markup(p.text)
    ]
    assert len(hits) == 1, f"{fragment!r} should identify exactly one seed paper, got {hits}"
    return hits[0]


@pytest.fixture(scope="module")
def stub():
    """A stub of the OpenAI API on loopback (tests/openai_stub.py), one per test module."""
    from tests.openai_stub import StubOpenAI

    server = StubOpenAI()
    yield server
    server.close()


@pytest.fixture
def llm_engine(engine, stub, seed_storage):
    """Build engines that write answers with the stub (sharing the session engine's index and retriever)."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    stub.reset()

    def make(**overrides: object) -> Engine:
        values: dict[str, object] = dict(storage=seed_storage, llm="openai", openai_base_url=stub.url,
                                         openai_api_key="sk-test", llm_timeout=5.0, llm_retries=2)
        values.update(overrides)
        return Engine(Settings(**values), index=engine.index, retriever=engine.retriever,  # type: ignore[arg-type]
                      sentences=engine.sentences)

    return make


@pytest.fixture(scope="module")
def seed_list():
    """The seed papers as the reader gives them."""
    from rag_bot.reading.corpus import read_paths

    return read_paths([SEEDS]).papers


@pytest.fixture(scope="module")
def embedder():
    """One loaded model for the whole module (loading it is the slow part of opening an index)."""
    from rag_bot.settings import Settings
    from rag_bot.store.embedding import MiniLMEmbedding

    defaults = Settings()
    return MiniLMEmbedding(max_tokens=defaults.max_tokens, embed_batch_size=defaults.embed_batch_size)
