"""Fit the cut at which a refusal quotes the question's topic back (rag_bot/writing/compose.py QUOTED_TOPIC_COSINE).

    python -m bench.fit.quoted_topic

A refusal says "The collection does not seem to cover “PHRASE”", PHRASE from `topics.topic_phrase`. For a long
question that phrase can be a fragment ("principled", "tricks"). bench/data/topic_quote_labels.jsonl holds 489
phrases of the dev set's, the judged and the readers' questions, each read by one of three readers: does the sentence
tell the user what their question was about (bench/data/README.md says how). The signal is the cosine, with the
shipped embedder, of the phrase to the question's topic (`topic_query`); the cut is the one with the best accuracy on
the fit part (the lower on a tie: it quotes more), reported on the locked part (sha1(id) % 3 == 0). Writes
bench/results/quoted_topic.json.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from bench.fit.relevance import read_jsonl
from rag_bot.evaluation.split import locked

ROOT = Path(__file__).resolve().parents[2]
LABELS = ROOT / "bench" / "data" / "topic_quote_labels.jsonl"
RESULTS = ROOT / "bench" / "results" / "quoted_topic.json"


def figures(rows: list[dict], cut: float) -> dict:
    """Of a part's labelled phrases: how many, the share that say the topic among those quoted before and at the
    cut, the good ones still quoted, the bad ones quoted before and at the cut, and the accuracy."""
    quoted = [r for r in rows if r["cosine"] >= cut]
    good = [r for r in rows if r["good"]]
    return {"n": len(rows), "good among quoted, before": round(len(good) / len(rows), 3),
            "good among quoted": round(float(np.mean([r["good"] for r in quoted])), 3) if quoted else None,
            "good still quoted": round(sum(r["good"] for r in quoted) / max(len(good), 1), 3),
            "bad quoted, before": len(rows) - len(good), "bad quoted": sum(not r["good"] for r in quoted),
            "accuracy": round(float(np.mean([(r["cosine"] >= cut) == r["good"] for r in rows])), 3)}


def main() -> int:
    from rag_bot.settings import Settings
    from rag_bot.store.embedders import make_embedder
    from rag_bot.topics import topic_query

    rows = read_jsonl(LABELS)
    embedder = make_embedder(Settings())
    questions = np.asarray(embedder.embed([topic_query(r["question"]) for r in rows]))
    phrases = np.asarray(embedder.embed([r["phrase"] for r in rows]))
    for r, q, p in zip(rows, questions, phrases):
        r["cosine"] = float(q @ p)
    fit = [r for r in rows if not locked(r["id"])]
    grid = np.round(np.arange(0.30, 0.951, 0.01), 2)
    cut = float(max(grid, key=lambda c: (np.mean([(r["cosine"] >= c) == r["good"] for r in fit]), -c)))
    report = {"cut": cut, "load average": os.getloadavg()[0],
              **{part: figures([r for r in rows if (part == "locked") == locked(r["id"])], cut)
                 for part in ("fit", "locked")}}
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
