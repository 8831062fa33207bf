"""The sentences an honest answer says what is missing with, for every question the collection should not answer.

    python -m bench.eval.topic_phrases [--storage storage/bench-3000] [--code DIR] [--out FILE]

For each judged question of kind absent or partial (bench/data/relevance_questions.jsonl, fit and locked parts as
bench/fit/relevance.py defines them) and each unanswerable dev question (tests/data/dev_questions.jsonl): the first
line of the answer when it declines or leads with what the collection lacks, else "(answered)" and its first words.
`--code` runs another checkout's rag_bot (e.g. the parent commit) on the same store, so that before and after can be
read side by side; a reader counts the sentences that read wrong (docs/eval.md, "The words of an honest answer").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.checkout import use_rag_bot_from
from bench.fit.relevance import QUESTIONS, read_jsonl
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

DEV = ROOT / "tests" / "data" / "dev_questions.jsonl"


def questions() -> list[dict]:
    """The questions whose answer must say what is missing: judged absent/partial, and the dev set's unanswerable."""
    judged = [q | {"part": "locked" if locked(q["id"]) else "fit"} for q in read_jsonl(QUESTIONS)
              if q["kind"] in ("absent", "partial")]
    dev = [q | {"part": "dev"} for q in read_jsonl(DEV) if q["kind"] == "unanswerable"]
    return judged + dev


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--storage", type=Path, default=ROOT / "storage" / "bench-3000")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose rag_bot answers")
    parser.add_argument("--out", type=Path, help="write the rows as JSON lines here too")
    args = parser.parse_args()
    use_rag_bot_from(args.code)
    from rag_bot import answer_words as words  # the templates of the checkout that answers
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    if not (args.storage / "chroma.sqlite3").exists():
        print(f"{args.storage}: not built (bench/collections.py)", file=sys.stderr)
        return 1
    engine = Engine(Settings(storage=args.storage))
    rows = []
    for q in questions():
        answer = engine.ask(q["question"], mode=q["mode"] if q["mode"] != "ask" else None)
        first = answer.answer.split("\n")[0]
        said = first if not answer.grounded or first.startswith(words.MISSING_OPENINGS) else f"(answered) {first[:80]}"
        said = said.split(words.NEAREST_TOPICS.split("{titles}")[0])[0]
        rows.append({"id": q["id"], "part": q["part"], "question": q["question"], "said": said})
        print(f"{q['id']:10} {q['part']:6} {q['question']}\n{'':17} -> {said}")
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
