"""The embedder's limit: int8 MiniLM alone, one 256-token vector per abstract ("title. abstract"), on
length-sorted batches of real abstracts from ../shared/data/ml_abstracts.jsonl.gz.

    python -m bench.perf.embed_reference [--n 600] [--rounds 2] [--grid]

With --grid it tries onnxruntime settings (intra-op threads, batch size, arena) interleaved round by round,
so every configuration sees the same background load; without, it times the settings rag-bot uses
(rag_bot.store.embedding) and prints one JSON line: abstracts/s and tokens/s. Ingest is judged against this figure
(bench/perf/scale.py runs both in one process run).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
ML_ABSTRACTS = REPO.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"


def sample_texts(n: int, every: int = 7) -> list[str]:
    """`n` real abstracts as rag-bot embeds them (title. abstract), spread over the file."""
    out: list[str] = []
    with gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i % every == 3 and line.strip():
                rec = json.loads(line)
                out.append(f"{rec.get('title', '')}. {rec.get('abstract', '')}")
                if len(out) >= n:
                    break
    return out


def session(threads: int, arena: bool) -> Any:
    """An onnxruntime session of the packaged model with the given settings."""
    import onnxruntime as ort

    from rag_bot.store.embedding import model_files

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = arena
    return ort.InferenceSession(str(model_files()[0]), options, providers=["CPUExecutionProvider"])


def tokenizer(max_tokens: int = 256) -> Any:
    from tokenizers import Tokenizer

    from rag_bot.store.embedding import model_files

    tok = Tokenizer.from_file(str(model_files()[1]))
    tok.enable_truncation(max_length=max_tokens)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


def embed_all(sess: Any, tok: Any, texts: list[str], batch: int) -> tuple[np.ndarray, int]:
    """Embeds texts length-sorted in batches (the reference loop); returns vectors and real tokens."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), 384), dtype=np.float32)
    tokens = 0
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        enc = tok.encode_batch([texts[i] for i in idx])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        tokens += int(mask.sum())
        hidden = sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        w = mask[..., None].astype(np.float32)
        pooled = (hidden * w).sum(axis=1) / np.clip(w.sum(axis=1), 1e-9, None)
        out[idx] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
    return out, tokens


def reference(n: int = 600, rounds: int = 2) -> dict[str, Any]:
    """The reference figure with rag-bot's own embedder settings (best of `rounds`)."""
    from rag_bot.store.embedding import MiniLMEmbedding

    texts = sample_texts(n)
    emb = MiniLMEmbedding()
    emb.embed(texts[:32])  # warm-up
    rates = []
    tokens = 0
    for _ in range(rounds):
        start = time.perf_counter()
        emb.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    enc = emb._tokenizer.encode_batch(texts)
    tokens = sum(sum(e.attention_mask) for e in enc)
    best = max(rates)
    return {"abstracts": len(texts), "abstracts_per_s": round(best, 2),
            "tokens_per_s": round(best * tokens / len(texts)), "mean_tokens": round(tokens / len(texts), 1),
            "batch": emb.embed_batch_size, "rounds": [round(r, 2) for r in rates]}


def reference_on(texts: list[str]) -> dict[str, Any]:
    """The reference on given texts, one pass: seconds, abstracts/s and tokens/s (rag-bot's embedder settings)."""
    from rag_bot.store.embedding import MiniLMEmbedding

    emb = MiniLMEmbedding()
    emb.embed(texts[:16])  # warm-up (model load)
    start = time.perf_counter()
    emb.embed(texts)
    seconds = time.perf_counter() - start
    tokens = sum(len(e.ids) for e in emb._tokenizer.encode_batch(texts))
    return {"seconds": seconds, "abstracts_per_s": len(texts) / seconds, "tokens_per_s": round(tokens / seconds)}


def grid(n: int, rounds: int) -> list[dict[str, Any]]:
    """Abstracts/s of each onnxruntime configuration, interleaved round by round (same load for all)."""
    texts = sample_texts(n)
    tok = tokenizer()
    configs = [(t, b, a) for t in (1, 2) for b in (8, 16, 32, 64) for a in (True,)] + [(2, 32, False)]
    sessions = {(t, a): session(t, a) for t, _, a in configs}
    for s in sessions.values():
        embed_all(s, tok, texts[:64], 32)
    rates: dict[tuple[int, int, bool], list[float]] = {c: [] for c in configs}
    for _ in range(rounds):
        for t, b, a in configs:
            start = time.perf_counter()
            embed_all(sessions[(t, a)], tok, texts, b)
            rates[(t, b, a)].append(len(texts) / (time.perf_counter() - start))
    return [{"threads": t, "batch": b, "arena": a, "abstracts_per_s": round(max(r), 2),
             "median": round(statistics.median(r), 2)} for (t, b, a), r in rates.items()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--grid", action="store_true")
    args = ap.parse_args()
    if not ML_ABSTRACTS.exists():
        print(f"skipped: {ML_ABSTRACTS} not found", file=sys.stderr)
        return 0
    if args.grid:
        for row in grid(args.n, args.rounds):
            print(json.dumps(row))
    else:
        print(json.dumps(reference(args.n, args.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
