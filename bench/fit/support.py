"""Calibrate the support threshold: how well a cited abstract backs a claim, for faithful and for misattributed
citations, over the dev set.

    .venv/bin/python -m bench.fit.support [--store DIR]

For every answerable dev question the engine's sources are taken. A faithful claim is a sentence of the cited
paper's abstract with a third of its words dropped (a paraphrase-like rewording); a misattributed claim is a
sentence of another source of the same answer, cited as this paper (what a model that mixes up its sources
writes). The support of both is computed as answers compute it (rag_bot.writing.citations.support_scores); the table of
thresholds goes to stdout and docs/support.md.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from rag_bot.engine import Engine
from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions
from rag_bot.settings import Settings
from rag_bot.types import Answer, Citation
from rag_bot.writing.citations import support_scores

ROOT = Path(__file__).resolve().parents[2]
THRESHOLDS = (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)


def reworded(sentence: str, rng: random.Random) -> str:
    """The sentence with a third of its words (not the first) dropped."""
    words = sentence.split()
    keep = [w for i, w in enumerate(words) if i == 0 or rng.random() > 0.33]
    return " ".join(keep)


def support(engine: Engine, claim: str, paper_id: str) -> float:
    answer = Answer(question="q", mode="ask", answer=f"{claim} [1]", grounded=True, retrieved=[],
                    citations=[Citation(n=1, doc_id=paper_id, title="t", source="s", quote="q")])
    return support_scores(answer, engine.papers, engine.sentences.of, engine.sentences.embedder.embed)[1]


def main() -> None:
    """Measure both distributions and write the threshold table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or Path(tmp)
        engine = Engine(Settings(storage=store))
        if engine.index.count() == 0:
            engine.ingest([ROOT / "seeds"])
        faithful: list[float] = []
        wrong: list[float] = []
        for q in load_questions(DEFAULT_SET):
            if q.kind == "unanswerable":
                continue
            grounding = engine.ground(q.question, "summary")
            sources = [p.paper for p in grounding.sources]
            if len(sources) < 2:
                continue
            for i, paper in enumerate(sources[:3]):
                other = sources[(i + 1) % len(sources)]
                own = rng.choice(engine.sentences.of(paper)[0])
                foreign = rng.choice(engine.sentences.of(other)[0])
                faithful.append(support(engine, reworded(own, rng), paper.doc_id))
                wrong.append(support(engine, reworded(foreign, rng), paper.doc_id))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    f, w = np.array(faithful), np.array(wrong)
    lines = [f"Support calibration, dev set, commit `{commit}`: {len(f)} faithful and {len(w)} misattributed claims.",
             "", "| claims | n | p5 | p25 | median | p75 | p95 |", "|---|---|---|---|---|---|---|"]
    for label, values in (("faithful (reworded own sentence)", f), ("misattributed (another source's sentence)", w)):
        p = np.percentile(values, [5, 25, 50, 75, 95])
        lines.append(f"| {label} | {len(values)} | " + " | ".join(f"{x:.3f}" for x in p) + " |")
    lines += ["", "| threshold | faithful flagged | misattributed flagged |", "|---|---|---|"]
    for t in THRESHOLDS:
        lines.append(f"| {t:.2f} | {np.mean(f < t):.3f} | {np.mean(w < t):.3f} |")
    text = "\n".join(lines) + "\n"
    (ROOT / "docs" / "support.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
