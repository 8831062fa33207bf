"""Load test of the chat: the real server (`rag-bot serve`) on a free port, N users for S seconds.

Half of the users ask through the streamed chat (`/chat`, the event the Send button runs), half through
`/ask` (the JSON API), each in its own thread with its own gradio_client session, one question after the
other without pause. Latency is per question, from the call to the complete answer. Writes docs/load.md.

    .venv/bin/python bench/load.py                       # a temp store of the seeds, 20 users, 60 s
    .venv/bin/python bench/load.py --storage storage --users 10 --seconds 30 --out /tmp/load.md
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RAG_BOT = str(Path(sys.executable).parent / "rag-bot")
QUESTIONS = [
    "what does CorrSteer gain on HarmBench?",
    "how much faster is OServe?",
    "Summarize the work on federated LoRA fine-tuning",
    "Compare CorrSteer and SARSteer",
    "Which papers study LLM inference serving?",
    "What does SARSteer do?",
    "How do I make a sourdough bread starter?",
    "Summarize the work on LLM inference",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed_store(folder: Path) -> Path:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    storage = folder / "store"
    Engine(Settings(storage=storage)).ingest([ROOT / "seeds"])
    return storage


def start_server(storage: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), RAG_BOT_PORT=str(port), RAG_BOT_HOST="127.0.0.1",
               RAG_BOT_LOG_LEVEL="WARNING", GRADIO_ANALYTICS_ENABLED="False")
    log = (workdir / "serve.log").open("wb")
    proc = subprocess.Popen([RAG_BOT, "serve"], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"rag-bot serve exited with {proc.returncode}; see {workdir / 'serve.log'}")
        try:
            with urllib.request.urlopen(url + "config", timeout=2):
                return proc, url
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("rag-bot serve did not start within 180 s")


def user(url: str, kind: str, index: int, stop: float, results: dict[str, list[float]],
         errors: dict[str, list[str]], lock: threading.Lock) -> None:
    from gradio_client import Client

    client = Client(url, verbose=False)
    n = index
    while time.monotonic() < stop:
        question = QUESTIONS[n % len(QUESTIONS)]
        n += 1
        start = time.perf_counter()
        try:
            if kind == "chat":
                messages, *_ = client.predict(question, [], "Auto", 6, api_name="/chat")
                assert messages and messages[-1]["role"] == "assistant", "no answer in the chat"
            else:
                result = client.predict(question, "Auto", 0, api_name="/ask")
                assert "answer" in result, "no answer in the JSON"
        except Exception as exc:  # counted, not raised: the run goes on
            with lock:
                errors[kind].append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        with lock:
            results[kind].append(time.perf_counter() - start)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--storage", type=Path, help="store folder to serve (default: a temp store of the seeds)")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "load.md")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="rag-bot-load-"))
    try:
        storage = args.storage or seed_store(workdir)
        proc, url = start_server(storage, workdir)
        try:
            results: dict[str, list[float]] = {"chat": [], "ask": []}
            errors: dict[str, list[str]] = {"chat": [], "ask": []}
            lock = threading.Lock()
            stop = time.monotonic() + args.seconds
            threads = [
                threading.Thread(target=user, args=(url, "chat" if i % 2 == 0 else "ask", i, stop, results, errors,
                                                    lock))
                for i in range(args.users)
            ]
            began = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - began
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = []
    for kind, label in (("chat", "`/chat` (streamed chat)"), ("ask", "`/ask` (JSON)")):
        values = results[kind]
        if values:
            rows.append(f"| {label} | {args.users // 2 if kind == 'ask' else (args.users + 1) // 2} | {len(values)} | "
                        f"{statistics.median(values):.2f} | {percentile(values, 0.95):.2f} | {max(values):.2f} | "
                        f"{len(values) / elapsed:.1f} | {len(errors[kind])} |")
        else:
            rows.append(f"| {label} | - | 0 | - | - | - | 0 | {len(errors[kind])} |")
    every = results["chat"] + results["ask"]
    total_errors = len(errors["chat"]) + len(errors["ask"])
    p95 = percentile(every, 0.95) if every else float("nan")
    verdict = "met" if total_errors == 0 and p95 <= 2.0 else "NOT met"
    text = "\n".join([
        "# Chat load test",
        "",
        f"`bench/load.py`: the real `rag-bot serve` over {'the seed collection' if not args.storage else args.storage}"
        f" (offline composer), {args.users} users for {args.seconds:.0f} s, half through the streamed chat "
        "(`/chat`), half through `/ask`, each user asking one question after the other with no pause "
        "(gradio_client, one session per user, all on the same machine as the server). Latency: from the call to "
        "the complete answer, in seconds.",
        "",
        f"Machine: {os.cpu_count()} cores ({platform.machine()}, {platform.system()}, Python "
        f"{platform.python_version()}); commit {commit()}; {time.strftime('%Y-%m-%d')}.",
        "",
        "| endpoint | users | answers | p50 | p95 | max | answers/s | errors |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"All: {len(every)} answers, {len(every) / elapsed:.1f}/s, p95 {p95:.2f} s, {total_errors} errors. "
        f"Target (0 errors, p95 ≤ 2 s): **{verdict}**.",
    ])
    if total_errors:
        text += "\n\nFirst errors:\n\n" + "\n".join(f"- {e}" for e in (errors["chat"] + errors["ask"])[:5])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
