"""A llama.cpp server for a local GGUF model, run as a managed child process on loopback (RAG_BOT_LLM=local).

`xllamacpp` embeds llama.cpp's own OpenAI-compatible HTTP server. It runs in a child process (`python -m
rag_bot.writing.local_llm`) rather than in ours, so that a crash inside llama.cpp cannot take the chat down with it: the
child is started on first use, prints its address when the model is loaded, and is stopped at exit. It also exits
by itself when its standard input closes, so it never outlives a parent that was killed.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import logging
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

log = logging.getLogger(__name__)

GGUF_MAGIC = b"GGUF"


class LocalModelError(RuntimeError):
    """The local model cannot be served; the message says why and what to do."""


def check_gguf(path: Path | None) -> Path:
    """The GGUF file to serve, or `LocalModelError` when it is not set, missing, or not a GGUF file."""
    if path is None:
        raise LocalModelError("RAG_BOT_LLM=local needs RAG_BOT_GGUF=/path/to/model.gguf")
    path = Path(path).expanduser()
    if not path.is_file():
        raise LocalModelError(f"RAG_BOT_GGUF={path}: no such file")
    with path.open("rb") as f:
        magic = f.read(4)
    if magic != GGUF_MAGIC:
        raise LocalModelError(f"RAG_BOT_GGUF={path} is not a GGUF model file (it does not start with 'GGUF')")
    return path


def xllamacpp_installed() -> bool:
    """Whether the llama.cpp server package (`xllamacpp`) can be imported."""
    return importlib.util.find_spec("xllamacpp") is not None


def model_name(path: Path) -> str:
    """The name the answers report for a local model: its file name without `.gguf`."""
    return Path(path).name.removesuffix(".gguf")


class LocalServer:
    """One llama.cpp server child process serving one GGUF file on 127.0.0.1."""

    def __init__(self, gguf: Path, context: int = 4096, start_timeout: float = 180.0) -> None:
        self.gguf = check_gguf(gguf)
        self.context = context
        self.start_timeout = start_timeout
        self.url: str | None = None
        self._process: subprocess.Popen[str] | None = None
        self._log = Path(tempfile.gettempdir()) / f"rag-bot-llama-{id(self)}.log"

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> str:
        """Start the server (if it is not running) and return its base URL, e.g. http://127.0.0.1:41234."""
        if self.running and self.url:
            return self.url
        if not xllamacpp_installed():
            raise LocalModelError("RAG_BOT_LLM=local needs the llama.cpp server package: pip install xllamacpp")
        with self._log.open("w") as log_file:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "rag_bot.writing.local_llm", "--gguf", str(self.gguf), "--context", str(self.context)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file, text=True,
            )
        ready: dict[str, str] = {}

        def read_address() -> None:
            assert self._process is not None and self._process.stdout is not None
            line = self._process.stdout.readline()
            if line.strip():
                ready.update(json.loads(line))

        reader = threading.Thread(target=read_address, daemon=True)
        reader.start()
        reader.join(self.start_timeout)
        if "url" not in ready:
            reason = self._last_log_line() or "no output"
            log.error("llama.cpp server for %s did not start: %s", self.gguf.name, reason)
            self.stop()
            raise LocalModelError(f"the llama.cpp server did not start for {self.gguf.name}: {reason}")
        self.url = ready["url"]
        self._wait_healthy()
        log.info("llama.cpp server for %s listening on %s", self.gguf.name, self.url)
        return self.url

    def _wait_healthy(self) -> None:
        """Wait until /health answers: the address is printed once the model is loaded, this makes sure."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise LocalModelError(f"the llama.cpp server for {self.gguf.name} does not answer at {self.url}")

    def _last_log_line(self) -> str:
        try:
            lines = [line.strip() for line in self._log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            return ""
        errors = [line for line in lines if " E " in line or "error" in line.lower()]
        return (errors or lines or [""])[-1][:300]

    def stop(self) -> None:
        """Stop the child process (closing its stdin asks it to exit; it is killed if it does not)."""
        process, self._process, self.url = self._process, None, None
        if process is None:
            return
        try:
            if process.stdin:
                process.stdin.close()
            process.terminate()
            process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            log.warning("llama.cpp server did not stop within 10 s: killed")
            process.kill()
            process.wait(timeout=10)
        self._log.unlink(missing_ok=True)  # llama.cpp logs every request; the log only matters while it runs


_servers: dict[Path, LocalServer] = {}
_lock = threading.Lock()


def local_server(gguf: Path | None) -> LocalServer:
    """The process-wide server for a GGUF file, started on first use and stopped at exit."""
    path = check_gguf(gguf).resolve()
    with _lock:
        server = _servers.get(path)
        if server is None:
            server = _servers[path] = LocalServer(path)
        server.start()
        return server


@atexit.register
def stop_all() -> None:
    """Stop every local server this process started."""
    for server in list(_servers.values()):
        server.stop()
    _servers.clear()


def _serve(gguf: str, context: int) -> None:
    """Child-process side: load the model in llama.cpp's server, print its address, serve until stdin closes."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = gguf
    params.n_ctx = context
    params.n_parallel = 1  # one answer at a time; each gets the whole context window
    params.hostnames = ["127.0.0.1"]  # loopback only: the server has no API key
    params.port = 0  # any free port; the address is reported on stdout
    params.ui = False
    server = xllamacpp.Server(params)
    print(json.dumps({"url": server.listening_address}), flush=True)
    sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
    del server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve a GGUF model with llama.cpp on 127.0.0.1 (rag-bot child).")
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--context", type=int, default=4096)
    args = parser.parse_args()
    _serve(args.gguf, args.context)
