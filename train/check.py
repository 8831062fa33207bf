"""AUC of a cross-encoder checkpoint on judged pairs (bench/data/relevance_pairs.jsonl), which it never trained on.

    python -m train.check [--checkpoint train/out/cross-encoder/checkpoint.pt] [--part fit|locked] [--limit 400]

For watching a run: the fit part (questions not `locked`, rag_bot.evaluation.split) by default; the locked part is read only to
report a finished model, never to choose a step or a setting.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from rag_bot.evaluation.split import locked  # the one locked split
from train.cross_encoder import BASE, MAX_TOKENS, passage
from train.pairs import DATA, ML_ABSTRACTS, read_jsonl

ROOT = Path(__file__).resolve().parent.parent


def auc(scores: np.ndarray, y: np.ndarray) -> float:
    pos, neg = scores[y == 1], scores[y == 0]
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def main() -> int:
    import gzip
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", type=Path, default=ROOT / "train" / "out" / "cross-encoder" / "checkpoint.pt")
    parser.add_argument("--part", choices=("fit", "locked"), default="fit")
    parser.add_argument("--limit", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    texts = {}
    for line in gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8"):
        r = json.loads(line)
        texts[r["id"]] = passage(r)
    questions = {q["id"]: q for q in read_jsonl(DATA / "relevance_questions.jsonl")}
    pairs = [p for p in read_jsonl(DATA / "relevance_pairs.jsonl") if p["doc_id"] in texts
             and p["qid"] in questions and locked(p["qid"]) == (args.part == "locked")]
    random.Random(0).shuffle(pairs)
    pairs = pairs[: args.limit]
    model = BertForSequenceClassification.from_pretrained(BASE, num_labels=1)
    model.load_state_dict(torch.load(args.checkpoint, weights_only=False)["model"])
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(BASE)
    scores = []
    with torch.no_grad():
        for i in range(0, len(pairs), 16):
            batch = pairs[i:i + 16]
            enc = tokenizer([questions[p["qid"]]["question"] for p in batch], [texts[p["doc_id"]] for p in batch],
                            truncation="only_second", max_length=MAX_TOKENS, padding=True, return_tensors="pt")
            scores += model(**enc).logits.squeeze(-1).tolist()
    s, y = np.array(scores), np.array([float(p["relevant"]) for p in pairs])
    modes = np.array([questions[p["qid"]]["mode"] for p in pairs])
    print(json.dumps({"part": args.part, "pairs": len(pairs), "auc": round(auc(s, y), 3),
                      **{m: round(auc(s[modes == m], y[modes == m]), 3) for m in sorted(set(modes))}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
