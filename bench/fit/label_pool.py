"""The papers a judge reads for each labelled question: a pool from three rankings, not from the default alone.

    python -m bench.fit.label_pool QUESTIONS.jsonl OUT --size 3000     # needs storage/bench-3000 (bench/collections.py)

QUESTIONS.jsonl holds {"id", "question", "mode", ...}. For each question the pool is the union of the hybrid
ranking's top 10, the dense ranking's top 6 and BM25's top 6 (so a judgement does not only see what today's
fusion prefers). Writes OUT.jsonl ({"qid", "doc_id", "title", "size"} per pair) and OUT.md (each question with its
pooled papers' titles and abstracts, to read and judge). Pairs already judged (bench/data/relevance_pairs.jsonl)
are left out, so a second size only adds what is new there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JUDGED = ROOT / "bench" / "data" / "relevance_pairs.jsonl"


def pool(engine, question: str) -> list[str]:
    """doc_ids of a question's pool, hybrid order first."""
    from rag_bot.topics import topic_query
    retriever = engine.retriever
    snap = retriever._snapshot
    topic = topic_query(question)
    hybrid = [p.paper.doc_id for p in retriever.retrieve_papers(question, top_k=10)]
    dense = retriever._dense(snap, topic, 30)
    lexical = snap.bm25_scores(retriever._query_stems(snap, topic), 30)
    out = list(hybrid)
    for ranking in (dense, lexical):
        out += [d for d in sorted(ranking, key=ranking.__getitem__, reverse=True) if d not in out][:6]
    return [d for d in dict.fromkeys(out) if d in snap.papers]


def main() -> int:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    parser = argparse.ArgumentParser()
    parser.add_argument("questions", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", type=int, default=3000)
    args = parser.parse_args()
    store = ROOT / "storage" / f"bench-{args.size}"
    if not (store / "chroma.sqlite3").exists():
        print(f"{store} is not built: python -m bench.collections {args.size}", file=sys.stderr)
        return 1
    judged = set()
    if JUDGED.exists():
        for line in JUDGED.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                judged.add((d["qid"], d["doc_id"]))
    engine = Engine(Settings(storage=store))
    questions = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs, md = [], []
    for q in questions:
        ids = [d for d in pool(engine, q["question"]) if (q["id"], d) not in judged]
        md.append(f"## {q['id']} ({q.get('mode', 'ask')}): {q['question']}\n")
        for d in ids:
            paper = engine.retriever.papers[d]
            pairs.append({"qid": q["id"], "doc_id": d, "title": paper.title, "size": args.size})
            md.append(f"- `{d}` **{paper.title}**\n  {paper.text}\n")
    args.out.with_suffix(".jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
    args.out.with_suffix(".md").write_text("\n".join(md), encoding="utf-8")
    print(f"{len(pairs)} pairs for {len(questions)} questions -> {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
