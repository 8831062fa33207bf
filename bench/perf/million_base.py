"""The figures this change moves, measured for a parent commit's code and this checkout's on the same store in one
run, interleaved (issue 25): cold `rag-bot ask`, cold `rag-bot stats`, and in one process a question filtered to
years 2019-2021 (the one that failed at 300,000 papers) and retrieval p50. The parent's code is a git worktree put
first on PYTHONPATH (the store's data is read by both; each builds its own lexical cache, so every round starts
with one ask that builds it and is not counted).

    git worktree add /tmp/base <commit>
    .venv/bin/python -m bench.perf.million_base /tmp/base STORE [STORE ...] [--rounds 3]

Appends to bench/results/million_base.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.perf import scale

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "million_base.json"
QUESTION = "what does the collection say about sparse attention?"
CHILD = """
import json, sys, time
from rag_bot.engine import Engine
from rag_bot.settings import Settings
from rag_bot.types import Filters
engine = Engine(Settings(storage=sys.argv[1], llm="offline"))
engine.retriever
t = time.perf_counter()
engine.retriever.retrieve_papers(sys.argv[2], filters=Filters.parse(year="2019-2021"))
filtered = time.perf_counter() - t
times = []
for q in ("sparse attention", "graph neural networks for molecules", "federated learning with LoRA",
          "diffusion models for images", "reinforcement learning from human feedback"):
    t = time.perf_counter()
    engine.retriever.retrieve_papers(q)
    times.append(time.perf_counter() - t)
print(json.dumps({"filtered_retrieve_s": filtered, "retrieve_median_ms": sorted(times)[2] * 1000}))
"""


def run(code: Path, store: Path, args: list[str]) -> tuple[float, float, str]:
    env = scale.env_for(store) | {"PYTHONPATH": str(code)}
    start = time.perf_counter()
    # From the code's own folder: `python -m` and `-c` put the working folder first on the path.
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *args], capture_output=True, text=True, env=env, cwd=code)
    seconds = time.perf_counter() - start
    if proc.returncode:
        return float("nan"), float("nan"), proc.stderr[-500:]
    return seconds, int(proc.stderr.strip().splitlines()[-1]) / 1024, proc.stdout


def drop_sentences(store: Path) -> None:
    """The parent's code cannot read the 8-bit sentence vectors this checkout writes: the cache is dropped (both
    codes then embed a question's papers at their first use, as on a fresh store)."""
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(path=str(store), settings=ChromaSettings(anonymized_telemetry=False))
    for collection in client.list_collections():
        if collection.name.endswith("_sentences"):  # where stores before rag_bot/store/caches.py kept them
            client.delete_collection(collection.name)
    shutil.rmtree(store / "sentences", ignore_errors=True)  # the file beside the store


def measure(code: Path, store: Path) -> dict:
    python, rag_bot = sys.executable, str(Path(sys.executable).parent / "rag-bot")
    drop_sentences(store)
    # The first ask of a code's round builds its lexical cache (the two codes' caches replace each other).
    first = run(code, store, [python, "-m", "rag_bot.surfaces.cli", "ask", QUESTION])
    ask = run(code, store, [python, "-m", "rag_bot.surfaces.cli", "ask", QUESTION])
    stats = run(code, store, [python, "-m", "rag_bot.surfaces.cli", "stats"])
    child = run(code, store, [python, "-c", CHILD, str(store), QUESTION])
    inner = json.loads(child[2].strip().splitlines()[-1]) if child[2].strip().startswith("{") else {"error": child[2]}
    del rag_bot
    return {"first_ask_s": first[0], "ask_s": ask[0], "ask_peak_mib": ask[1], "stats_s": stats[0]} | inner


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path, help="a worktree of the parent commit")
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    for store in args.stores:
        runs: dict[str, list[dict]] = {"base": [], "head": []}
        load = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            for name, code in (("base", args.base.resolve()), ("head", ROOT)):
                runs[name].append(measure(code, store.resolve()))
                load.append(os.getloadavg()[0])
        row = {"store": str(store), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "load_1min": [round(x, 2) for x in load]}
        for name, values in runs.items():
            for key in values[0]:
                numbers = [v[key] for v in values if isinstance(v.get(key), (int, float))]
                row[f"{name}_{key}"] = round(statistics.median(numbers), 3) if numbers else None
        rows.append(row)
        RESULTS.write_text(json.dumps(rows, indent=2) + "\n")
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
