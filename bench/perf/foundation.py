"""Foundation figures: seed ingest and re-ingest time, `rag-bot ask` cold time, warm answer latency
(p50/p95 over the dev questions, through `--batch`), peak memory, and store size.

Run: `make bench` (or `.venv/bin/python -m bench.perf.foundation`). Writes docs/bench.md.
The warm latency of the default (hybrid) configuration is compared in the same run against a
baseline: dense-only retrieval.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
QUESTIONS = ROOT / "tests" / "data" / "dev_questions.jsonl"


def run(args: list[str], env: dict[str, str], stdin: str | None = None) -> tuple[float, str, int]:
    """Wall time, stdout and peak RSS (KiB) of a command."""
    start = time.perf_counter()
    wrapped = ["/usr/bin/time", "-f", "%M", *args] if Path("/usr/bin/time").exists() else args
    proc = subprocess.run(wrapped, env=env, input=stdin, capture_output=True, text=True, check=True)
    peak = int(proc.stderr.strip().splitlines()[-1]) if wrapped is not args else 0
    return time.perf_counter() - start, proc.stdout, peak


def dir_size(path: Path) -> int:
    """Bytes under a folder."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    """Measure and write docs/bench.md."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no arguments; --help
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "RAG_BOT_STORAGE": tmp, "GRADIO_ANALYTICS_ENABLED": "False"}
        env.pop("OPENAI_API_KEY", None)
        ingest_s, _, ingest_rss = run([str(BIN / "rag-bot"), "ingest", "--quiet"], env)
        reingest_s, reingest_out, _ = run([str(BIN / "rag-bot"), "ingest", "--quiet"], env)
        cold = []
        for _ in range(3):
            seconds, _, ask_rss = run([str(BIN / "rag-bot"), "ask", "--json", "what is sparse attention for long contexts?"], env)
            cold.append(seconds)
        probe = subprocess.run(
            [sys.executable, "-c", "import sys; from rag_bot.surfaces.cli import main; main(['ask','--json','test question'])"
             "; print('gradio' in sys.modules, file=sys.stderr)"],
            env=env, capture_output=True, text=True, check=True,
        )
        gradio_loaded = probe.stderr.strip().splitlines()[-1]
        questions = "\n".join(json.loads(line)["question"] for line in QUESTIONS.read_text().splitlines() if line)
        results = {}
        for label, retrieval in (("hybrid (default)", "hybrid"), ("dense only (baseline)", "dense")):
            env_mode = {**env, "RAG_BOT_RETRIEVAL": retrieval}
            batch_s, out, batch_rss = run([str(BIN / "rag-bot"), "ask", "--json", "--batch", "-"], env_mode, questions)
            totals = [json.loads(line)["timings_ms"]["total"] for line in out.splitlines()]
            results[label] = (np.percentile(totals, 50), np.percentile(totals, 95), len(totals), batch_s, batch_rss)
        size = dir_size(Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = [
        "# Foundation benchmark",
        "",
        f"Commit `{commit}`, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, offline composer, "
        "int8 MiniLM (onnxruntime). Produced by `make bench` (bench/perf/foundation.py).",
        "",
        "| figure | value |",
        "|---|---|",
        f"| seed ingest (38 abstracts, fresh store, incl. start-up) | {ingest_s:.1f} s, peak RSS {ingest_rss / 1024:.0f} MiB |",
        f"| re-ingest (nothing changed) | {reingest_s:.1f} s — `{reingest_out.strip()}` |",
        f"| `rag-bot ask` cold (process start to answer, best of 3) | {min(cold):.2f} s, peak RSS {ask_rss / 1024:.0f} MiB |",
        f"| gradio imported by `rag-bot ask` | {gradio_loaded} |",
        f"| store size (38 abstracts) | {size / 1e6:.2f} MB |",
        "",
        "Warm answer latency over the dev questions, one `--batch` process (engine time per question):",
        "",
        "| configuration | p50 ms | p95 ms | questions | batch wall s | peak RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for label, (p50, p95, n, wall, rss) in results.items():
        lines.append(f"| {label} | {p50:.0f} | {p95:.0f} | {n} | {wall:.1f} | {rss / 1024:.0f} |")
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "bench.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
