"""How soon `rag-bot serve` is ready: process start until the chat page answers (GET / and Gradio's /config),
and until the first question is answered (POST /v1/chat/completions beside the chat), for the working tree and a
baseline commit in the same run, on the seeds and on a larger store. Results: bench/results/chat-ready.json and
docs/benchmarks.md ("Chat ready").

    .venv/bin/python -m bench.perf.chat_ready [--base REV] [--runs 3] [STORE ...]   (default stores: storage/bench-seeds,
                                                                               storage/bench-22000)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
QUESTION = "which paper steers LLMs using correlated sparse autoencoder features?"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(code: Path) -> str:
    module = "rag_bot.surfaces.cli" if (code / "rag_bot" / "surfaces" / "cli.py").exists() else "rag_bot.cli"
    return f"import sys; from {module} import main; sys.exit(main(['serve']))"


def one_start(code: Path, store: Path) -> dict[str, float]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(store), RAG_BOT_PORT=str(port), RAG_BOT_HOST="127.0.0.1", PYTHONPATH=str(code),
               GRADIO_ANALYTICS_ENABLED="False", RAG_BOT_LOG_LEVEL="WARNING")
    if os.environ.get("BENCH_CHROMA_URL"):  # bench/perf/million.py --server
        env["RAG_BOT_CHROMA_URL"] = os.environ["BENCH_CHROMA_URL"]
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        proc = subprocess.Popen([str(PYTHON), "-c", _entry(code)], env=env, cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            page = _wait(lambda: urllib.request.urlopen(base + "/config", timeout=2), proc) - start
            body = json.dumps({"model": "rag-bot", "messages": [{"role": "user", "content": QUESTION}]}).encode()
            request = urllib.request.Request(base + "/v1/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            answered = _wait(lambda: urllib.request.urlopen(request, timeout=120), proc) - start
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {"page_s": page, "first_answer_s": answered}


def _wait(call, proc: subprocess.Popen) -> float:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            with call() as reply:
                reply.read()
                return time.perf_counter()
        except OSError:
            time.sleep(0.05)
    raise SystemExit("not ready within 300 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stores", nargs="*", default=["storage/bench-seeds", "storage/bench-22000"])
    parser.add_argument("--base", default="HEAD", help="the baseline commit (default HEAD: the working tree's parent)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, object] = {"load_before": os.getloadavg(), "base": args.base, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base_tree), args.base], cwd=ROOT, check=True)
        try:
            for store in args.stores:
                for label, code in (("base", base_tree), ("head", ROOT)):
                    runs = [one_start(code, (ROOT / store).resolve()) for _ in range(args.runs)]
                    row = {"store": store, "code": label,
                           **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
                           "runs": runs, "load": os.getloadavg()}
                    results["rows"].append(row)  # type: ignore[union-attr]
                    print(f"{store:28} {label}: page {row['page_s']:.2f} s, first answer {row['first_answer_s']:.2f} s "
                          f"(load {row['load'][0]:.2f})", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False)
    out = ROOT / "bench" / "results" / "chat-ready.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
