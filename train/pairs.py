"""Build the cross-encoder's training pairs (issue 36, part 1): (question, paper, relevant) from three sources.

    python -m train.pairs [--titles 3000] [--out train/out/pairs.jsonl]

- reader: bench/data/reader_questions_*.jsonl, a question worded unlike its paper's abstract (positive) and hard
  negatives mined from today's retriever on the 22,166-paper store (storage/bench-22000): for a question asking one
  paper (paraphrase, fast-when) its top-ranked other papers, for an area (area-line, joined) papers ranked 20-60,
  less likely to be on the same topic;
- title: the collection's own structure, an unlocked paper's title asked as a question finds that paper, its
  retriever's top other papers are negatives;
- sentence (`--sentences N`): the same with a paper's contribution sentence as the question (as calibration's
  known items, rag_bot/grounding/calibrate.py), that sentence held out of the paper's text (`drop`), so the paper
  must be recognised from its other sentences, as a question describing it in other words asks.

Not the judged pairs (bench/data/relevance_pairs.jsonl), nor the papers bench/fit/relevance.py asks by title
(`fit_items`): the fitted decision weighs the cross-encoder's score beside its other signals on those, so the
cross-encoder must not have seen them (a score learnt on the same pairs would be trusted more than it earns).
Never in any role (../shared/TRAINING.md): the seeds, the CSFCube corpus (by title), a locked paper
or question (rag_bot.evaluation.split `locked`). Near duplicates of the target (same normalised title)
are never negatives. The random choices are seeded: the same store and data give the same file.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
from functools import lru_cache
from pathlib import Path

from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parent.parent

ML_ABSTRACTS = ROOT.parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
CSFCUBE = ROOT.parent / "shared" / "data" / "csfcube" / "corpus.jsonl.gz"
DATA = ROOT / "bench" / "data"
OUT = ROOT / "train" / "out" / "pairs.jsonl"
SEED = 36
NEGATIVES = 4  # hard negatives per mined question


def norm_title(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", title.lower()).strip()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@lru_cache(maxsize=1)
def every_record() -> tuple[dict, ...]:
    """The 22,148-record file, in file order (read once)."""
    return tuple(json.loads(line) for line in gzip.open(ML_ABSTRACTS, "rt", encoding="utf-8"))


def records() -> dict[str, dict]:
    """The 22,148-record file's papers that may be trained on: unlocked, not in CSFCube."""
    banned = {norm_title(json.loads(line)["title"]) for line in gzip.open(CSFCUBE, "rt", encoding="utf-8")}
    return {r["id"]: r for r in every_record() if not locked(r["id"]) and norm_title(r["title"]) not in banned}


def fit_items(usable: dict[str, dict], per_size: int = 600) -> set[str]:
    """The papers bench/fit/relevance.py's `generated_items` asks by title at 3,000 and 22,000 papers (its default
    is 300 per size; twice that is kept out)."""
    ids = [r["id"] for r in every_record()]
    out: set[str] = set()
    for size, members in ((3000, ids[::7]), (22000, ids)):
        ranked = sorted(members, key=lambda d: hashlib.sha1(f"{size}:{d}".encode()).hexdigest())
        out |= set(ranked[:per_size])
    return out & set(usable)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--titles", type=int, default=3000, help="title questions mined from the collection")
    parser.add_argument("--sentences", type=int, default=0, help="contribution-sentence questions (0: none)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    usable = records()
    titles = {d: norm_title(r["title"]) for d, r in usable.items()}
    rng = random.Random(SEED)
    pairs: list[dict] = []

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    engine = Engine(Settings(storage=ROOT / "storage" / "bench-22000"))
    retrieve = engine.retriever.retrieve_papers

    def mine(qid: str, question: str, target: str, mode: str, source: str, ranks: slice, drop: str = "") -> None:
        ranked = [p.paper.doc_id for p in retrieve(question, top_k=ranks.stop)][ranks]
        negatives = [d for d in ranked if d != target and d in usable and titles[d] != titles[target]]
        pairs.append({"source": source, "qid": qid, "mode": mode, "question": question, "doc_id": target,
                      "relevant": True, **({"drop": drop} if drop else {})})
        for d in negatives[:NEGATIVES]:
            pairs.append({"source": source, "qid": qid, "mode": mode, "question": question, "doc_id": d,
                          "relevant": False})

    readers = [q for path in sorted(DATA.glob("reader_questions_*.jsonl")) for q in read_jsonl(path)]
    for i, q in enumerate(readers):
        target = q["target"][0]
        if locked(q["id"]) or target not in usable:
            continue
        one_paper = q["style"] in ("paraphrase", "fast-when", "problem")
        # A problem-first question (a reader's situation, as the dev set asks) is its own source, so that training
        # draws as many of them as of the other readers' questions.
        mine(q["id"], q["question"], target, "ask" if one_paper else "summary",
             "problem" if q["style"] == "problem" else "reader", slice(0, 12) if one_paper else slice(20, 60))
        if i % 100 == 0:
            print(f"reader {i}/{len(readers)}", file=sys.stderr, flush=True)
    taken = {q["target"][0] for q in readers} | fit_items(usable)
    candidates = sorted((d for d in usable if d not in taken and d in engine.retriever.papers
                         and 4 <= len(usable[d]["title"].split()) <= 20),
                        key=lambda d: hashlib.sha1(f"title:{d}".encode()).hexdigest())
    for i, d in enumerate(candidates[: args.titles]):
        mine(f"title-{d}", usable[d]["title"].strip(), d, "ask", "title", slice(0, 12))
        if i % 250 == 0:
            print(f"title {i}/{args.titles}", file=sys.stderr, flush=True)
    if args.sentences:
        from rag_bot.grounding.calibrate import known_items

        asked = set(candidates[: args.titles])
        rest = {d: engine.retriever.papers[d] for d in candidates[args.titles:] if d not in asked}
        items = [i for i in known_items(rest, count=args.sentences * 2) if i.question in usable[i.doc_id]["abstract"]]
        for i, item in enumerate(items[: args.sentences]):
            mine(f"sentence-{item.doc_id}", item.question, item.doc_id, "ask", "sentence", slice(0, 12), item.question)
            if i % 250 == 0:
                print(f"sentence {i}/{args.sentences}", file=sys.stderr, flush=True)
    rng.shuffle(pairs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    counts: dict[str, list[int]] = {}
    for p in pairs:
        counts.setdefault(p["source"], [0, 0])[p["relevant"]] += 1
    print(json.dumps({"pairs": len(pairs), "by source [negative, relevant]": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
