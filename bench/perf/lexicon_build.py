"""The lexicon build's time and peak memory, a parent commit's build against this checkout's, on the same store in
one run (issue 25): each build runs in its own process (its peak RSS is its own), reads every paper from the store,
and writes nothing into the store's cache (builds go to a temporary folder). The parent's build is its whole-list
one (before the paged build) or, with --base-mode paged, its paged one (before rag_bot/retrieval/bm25_build.py,
now in rag_bot/retrieval/lexical/).

    git worktree add /tmp/base <commit>
    .venv/bin/python -m bench.perf.lexicon_build /tmp/base STORE [STORE ...] [--base-mode paged]

Appends to bench/results/lexicon_build.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "lexicon_build.json"
CHILD = """
import json, resource, sys, tempfile, time
from pathlib import Path
import Stemmer
from rag_bot.engine import Engine
try:  # this checkout's package, or a parent's module (before rag_bot/retrieval/lexical/)
    from rag_bot.retrieval.lexical import LexicalCache
except ImportError:
    LexicalCache = None
    from rag_bot.retrieval import lexicon
from rag_bot.settings import Settings
index = Engine(Settings(storage=sys.argv[1], llm="offline")).index
state, stemmer = index.state(), Stemmer.Stemmer("english")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if sys.argv[2] == "paged" and LexicalCache is not None:
    papers = LexicalCache(index).write(Path(tempfile.mkdtemp(dir=sys.argv[3])), stemmer, state)
elif sys.argv[2] == "paged":
    papers = lexicon._build(index, stemmer, state, Path(tempfile.mkdtemp(dir=sys.argv[3])))
else:
    papers = len(lexicon._build(lexicon._read_records(index), stemmer, state)[0].ids)
print(json.dumps({"papers": papers, "build_s": time.perf_counter() - t, "rss_before_mib": before / 1024,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run(code_root: Path, store: Path, mode: str, scratch: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code_root))
    out = subprocess.run([sys.executable, "-c", CHILD, str(store), mode, str(scratch)], cwd=code_root, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("base", type=Path, help="a git worktree of the parent commit")
    parser.add_argument("stores", type=Path, nargs="+")
    parser.add_argument("--base-mode", choices=["whole", "paged"], default="whole")
    args = parser.parse_args()
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"lexicon-build-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    rows = []
    for store in args.stores:
        row: dict = {"store": str(store), "load_avg": os.getloadavg()[0], "when": time.strftime("%Y-%m-%d %H:%M")}
        row["base_" + args.base_mode] = run(args.base.resolve(), store.resolve(), args.base_mode, scratch)
        row["paged"] = run(ROOT, store.resolve(), "paged", scratch)
        row["load_avg_after"] = os.getloadavg()[0]
        print(json.dumps(row), flush=True)
        rows.append(row)
    subprocess.run(["rm", "-rf", str(scratch)], check=False)
    old = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    RESULTS.write_text(json.dumps(old + rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
