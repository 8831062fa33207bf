"""The whole of ../shared/data/ml_abstracts.jsonl.gz (22,148 real abstracts) ingested into a fresh store by
`rag-bot ingest`, against the embedder's limit, with its memory sampled over time.

    python -m bench.perf.full_ingest [--server] [--every 10]

- ingest: `rag-bot ingest --quiet <the file>` into a fresh folder store, or with --server into a fresh
  `chroma run` server (the same code, RAG_BOT_CHROMA_URL); wall time, and the resident memory of the ingest
  process (and of the server) sampled every second, peak included.
- baseline: the embedder reference (bench/perf/embed_reference.py: the model alone, one 256-token vector per
  abstract, length-sorted batches) on an evenly spread sample (every `--every`-th abstract), before and after the
  ingest; the reference time of the whole file is the mean sample time scaled by the word pieces of the whole
  file over the sample's (both counted with the model's tokenizer, truncated at 256).

Writes bench/results/full_ingest[-server].json; bench/perf/scale.py puts it in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ML_ABSTRACTS = REPO.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
BIN = REPO / ".venv" / "bin"
RESULTS = REPO / "bench" / "results"


def rss_mib(pid: int) -> float:
    """Resident memory of a process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler(threading.Thread):
    """Samples the resident memory of some processes every `every` seconds until stopped."""

    def __init__(self, pids: dict[str, int], every: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.every = every
        self.start_time = time.perf_counter()
        self.samples: list[dict[str, float]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            row = {"t": round(time.perf_counter() - self.start_time, 1)}
            row.update({name: round(rss_mib(pid), 1) for name, pid in self.pids.items()})
            self.samples.append(row)
            self.halt.wait(self.every)

    def peak(self, name: str) -> float:
        return max((s.get(name, 0.0) for s in self.samples), default=0.0)


def texts_of(every: int) -> tuple[list[str], list[str]]:
    """(every abstract, the evenly spread sample), as rag-bot embeds them (title. abstract)."""
    texts: list[str] = []
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                texts.append(f"{rec.get('title', '')}. {rec.get('abstract', '')}")
    return texts, texts[every // 2::every]


def word_pieces(texts: list[str]) -> int:
    """Word pieces the model sees (truncated at 256, no padding): the reference's tokenizer, no model loaded."""
    from bench.perf.embed_reference import tokenizer

    tok = tokenizer()
    tok.no_padding()
    return sum(len(e.ids) for e in tok.encode_batch(texts))


def reference_seconds(sample: list[str]) -> float:
    """The reference on the sample in a process of its own (so the bench process holds no model arena)."""
    code = ("import json, sys; from bench.perf import embed_reference as r; "
            "texts = json.load(sys.stdin); print(json.dumps(r.reference_on(texts)))")
    proc = subprocess.run([str(BIN / "python"), "-c", code], input=json.dumps(sample), capture_output=True,
                          text=True, cwd=REPO, check=True)
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["seconds"])


def start_chroma(path: Path) -> tuple[subprocess.Popen[bytes], str]:
    from bench.perf.load import free_port

    port = free_port()
    proc = subprocess.Popen([str(BIN / "chroma"), "run", "--path", str(path), "--host", "127.0.0.1", "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("chroma run did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", action="store_true", help="ingest into a fresh `chroma run` server")
    ap.add_argument("--every", type=int, default=10, help="reference sample: every n-th abstract")
    ap.add_argument("--keep", type=Path, help="keep the store here (a folder; with --server the server's data)")
    ap.add_argument("--seeds", action="store_true", help="ingest seeds/ too (for bench/perf/server_scale.py's dev set)")
    args = ap.parse_args()
    if not ML_ABSTRACTS.exists():
        raise SystemExit(f"{ML_ABSTRACTS} is missing (../shared/data is not on this machine)")
    texts, sample = texts_of(args.every)
    pieces_all, pieces_sample = word_pieces(texts), word_pieces(sample)
    refs = [reference_seconds(sample)]
    work = Path(tempfile.mkdtemp(prefix="rag-bot-full-ingest-"))
    store = args.keep or work / "store"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_LOG_LEVEL="WARNING", RAG_BOT_LLM="offline", RAG_BOT_STORAGE=str(work / "local"))
    server = None
    pids: dict[str, int] = {}
    if args.server:
        server, url = start_chroma(store)
        env["RAG_BOT_CHROMA_URL"] = url
        pids["server"] = server.pid
    else:
        env["RAG_BOT_STORAGE"] = str(store)
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    inputs = [str(REPO / "seeds")] * args.seeds + [str(ML_ABSTRACTS)]
    proc = subprocess.Popen([str(BIN / "rag-bot"), "ingest", "--quiet", *inputs], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids["ingest"] = proc.pid
    sampler = Sampler(pids)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.halt.set()
    sampler.join()
    load_after = os.getloadavg()[0]
    if proc.returncode:
        raise SystemExit(f"rag-bot ingest failed ({proc.returncode}): {err[-1500:]}")
    refs.append(reference_seconds(sample))
    if server is not None:
        server.terminate()
        server.wait(timeout=30)
    reference = statistics.mean(refs) * pieces_all / pieces_sample
    result: dict[str, Any] = {
        "mode": "chroma run server" if args.server else "folder", "abstracts": len(texts), "seeds": args.seeds,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "ingest_s": round(seconds, 1),
        "abstracts_per_s": round(len(texts) / seconds, 2), "reference_sample": len(sample),
        "reference_sample_s": [round(r, 1) for r in refs], "reference_s": round(reference, 1),
        "ratio": round(seconds / reference, 3), "word_pieces": pieces_all, "sample_word_pieces": pieces_sample,
        "peak_rss_mib": sampler.peak("ingest"), "server_peak_rss_mib": sampler.peak("server") or None,
        "load_before": round(load_before, 2), "load_after": round(load_after, 2), "report": out.strip(),
        "rss": sampler.samples[::10],
    }
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"full_ingest{'-server' if args.server else ''}.json"
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "rss"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
