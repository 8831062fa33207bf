"""The cost curve of a simulated collection (issue 25): for each store given (built by bench/perf/simulate.py and
`rag-bot import`), disk, cold `rag-bot ask` (time and peak RSS) and `stats`, chat ready (page, first answer),
and in one process: retrieve and whole offline answer p50/p95 (each paper's first use, then again), a filtered
question, the collection map (first computed, then read back), and that process's peak RSS. Appends a row per
store to bench/results/million.json; the table and slopes go to docs/benchmarks.md by hand from it.

    .venv/bin/python -m bench.perf.million storage/sim-100000 [storage/sim-300000 ...] [--questions 40]
    .venv/bin/python -m bench.perf.million --server /work/sim/server-1m     # a `chroma run --path` data folder
    .venv/bin/python -m bench.perf.million --server /work/sim/store-1m      # a folder store's files, served

With --server, each folder is a Chroma server's data: the bench starts `chroma run` on it, measures every figure
through RAG_BOT_CHROMA_URL, and adds the server's disk and peak RSS (the lexical cache is in the user's cache folder).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.perf import chat_ready, scale

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "million.json"


def disk_mib(store: Path) -> float:
    out = subprocess.run(["du", "-sk", str(store)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def in_process(store: Path, n_questions: int) -> dict[str, Any]:
    """Per-question costs in one process (run as a child: its peak RSS is its own)."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.surfaces.collection_map import map_of
    from rag_bot.types import Filters

    out: dict[str, Any] = {}
    start = time.perf_counter()
    url = os.environ.get("BENCH_CHROMA_URL")
    engine = Engine(Settings(storage=store, llm="offline", chroma_url=url) if url else
                    Settings(storage=store, llm="offline"))
    retriever = engine.retriever
    out["engine_load_s"] = time.perf_counter() - start
    papers = retriever.papers
    sample = {d: papers[d] for d in random.Random(3).sample(list(papers), 500)}
    questions = scale.questions_for(sample, n_extra=max(0, n_questions - 20))[-n_questions:]
    times: dict[str, list[float]] = {"retrieve": [], "answer_first": [], "answer_again": []}
    for q in questions:
        t = time.perf_counter()
        retriever.retrieve_papers(q)
        times["retrieve"].append((time.perf_counter() - t) * 1000)
    for label in ("answer_first", "answer_again"):
        for q in questions:
            t = time.perf_counter()
            engine.ask(q)
            times[label].append((time.perf_counter() - t) * 1000)
    for name, values in times.items():
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = scale.pct(values, 50), scale.pct(values, 95)
    t = time.perf_counter()
    engine.ask("what does the collection say about sparse attention?", filters=Filters.parse(year="2019-2021"))
    out["filtered_ask_ms"] = (time.perf_counter() - t) * 1000
    for label in ("map_first_s", "map_again_s"):
        t = time.perf_counter()
        map_of(engine.index, papers)
        out[label] = time.perf_counter() - t
    out["papers"], out["chunks"] = engine.index.count(), engine.index.chunk_count()
    out["rss_mib"], out["peak_rss_mib"] = scale.rss_mib()
    return out


def measure(store: Path, n_questions: int) -> dict[str, Any]:
    row: dict[str, Any] = {"store": str(store), "load_start": os.getloadavg(), "disk_mib": disk_mib(store)}
    row |= scale.cold_ask(store, runs=3)
    ready = [chat_ready.one_start(ROOT, store) for _ in range(2)]
    row["chat_page_s"] = min(r["page_s"] for r in ready)
    row["chat_first_answer_s"] = min(r["first_answer_s"] for r in ready)
    child = subprocess.run([sys.executable, "-m", __spec__.name, "--one", str(store), "--questions", str(n_questions)],
                           capture_output=True, text=True, cwd=ROOT)
    if child.returncode:
        raise SystemExit(child.stderr[-2000:])
    row |= json.loads(child.stdout.strip().splitlines()[-1])
    row["load_end"] = os.getloadavg()
    return row


@contextlib.contextmanager
def chroma_server(data: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`chroma run` on a data folder, its URL in BENCH_CHROMA_URL while it runs."""
    port = chat_ready.free_port()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "chroma"), "run", "--path", str(data), "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                break
        except OSError:
            time.sleep(0.5)
    os.environ["BENCH_CHROMA_URL"] = url
    try:
        yield proc
    finally:
        os.environ.pop("BENCH_CHROMA_URL", None)
        proc.terminate()
        proc.wait(timeout=60)


def server_peak_mib(proc: subprocess.Popen[bytes]) -> float:
    """The server's peak resident memory so far (MiB)."""
    for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stores", nargs="*", type=Path)
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--server", action="store_true", help="the folders are `chroma run` data folders")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(in_process(args.one.resolve(), args.questions)))
        return 0
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    for store in args.stores:
        if args.server:
            with chroma_server(store.resolve()) as server:
                row = measure(Path(tempfile.mkdtemp(prefix="million-")), args.questions)
                # A folder store's own caches beside Chroma's files (when a folder store's files are served) are
                # not the server's: its lexical cache is in the user's cache folder.
                ours = sum(disk_mib(store / name) for name in ("lexicon", "map") if (store / name).is_dir())
                row |= {"store": str(store.resolve()), "mode": "server", "disk_mib": disk_mib(store) - ours,
                        "server_peak_rss_mib": server_peak_mib(server)}
        else:
            row = measure(store.resolve(), args.questions) | {"mode": "folder"}
        rows = [r for r in rows if (r["store"], r.get("mode")) != (row["store"], row["mode"])] + [row]
        RESULTS.write_text(json.dumps(rows, indent=2) + "\n")
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
