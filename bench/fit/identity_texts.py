"""When two records that share a title or an identifier hold the same text: what sets rag_bot/reading/identity.py's
SAME_TEXT_OVERLAP, fitted on the 22,148 real abstracts (../shared/data/ml_abstracts.jsonl.gz).

Same paper: the 20 pairs that share a title of four words or more (each the same paper twice, a workshop and a
conference version; bench/fit/identity_titles.py). Different papers: every abstract's nearest other abstract by word
overlap among records with another title (the hardest case: the same authors' next paper on the same topic, or the
same paper retitled), and 200,000 random pairs. Identical placeholder abstracts under different titles (a data
artefact, overlap 1.0) are left out. The measure is `identity.text_overlap` (Jaccard of the two word sets).

    .venv/bin/python -m bench.fit.identity_texts
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np

from rag_bot.reading.identity import MIN_TITLE_WORDS, SAME_TEXT_OVERLAP, text_overlap, text_words, title_key

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ml_abstracts.jsonl.gz"
CUTS = (0.3, 0.4, 0.45, 0.5, 0.53)


def nearest_other(words: list[set[str]], titles: list[str]) -> list[tuple[float, int, int]]:
    """(overlap, i, j) for each abstract i and its nearest abstract j with another title: exact, by counting shared
    words through an inverted index."""
    vocab: dict[str, int] = {}
    docs = [np.fromiter((vocab.setdefault(w, len(vocab)) for w in ws), dtype=np.int64) for ws in words]
    postings: dict[int, list[int]] = defaultdict(list)
    for i, doc in enumerate(docs):
        for w in doc.tolist():
            postings[w].append(i)
    arrays = {w: np.array(ids, dtype=np.int64) for w, ids in postings.items()}
    sizes = np.array([len(d) for d in docs], dtype=float)
    out = []
    for i, doc in enumerate(docs):
        if not len(doc):
            continue
        shared = np.bincount(np.concatenate([arrays[w] for w in doc.tolist()]), minlength=len(docs)).astype(float)
        overlap = shared / np.maximum(sizes[i] + sizes - shared, 1)
        overlap[i] = -1
        for j in np.argsort(-overlap)[:5].tolist():  # the nearest with another title and another text
            if titles[j] != titles[i] and overlap[j] < 1.0:
                out.append((float(overlap[j]), i, j))
                break
    return out


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no arguments; --help
    if not DATA.exists():
        print(f"skipped: {DATA} is absent")
        return 0
    records = [json.loads(line) for line in gzip.open(DATA, "rt", encoding="utf-8")]
    texts = [str(r.get("abstract") or "") for r in records]
    titles = [" ".join(str(r.get("title") or "").casefold().split()) for r in records]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        if key := title_key(str(r.get("title") or "")):
            groups[key].append(i)
    same = sorted(text_overlap(texts[a], texts[b]) for ids in groups.values() for a, b in combinations(ids, 2))
    print(f"same paper ({len(same)} pairs sharing a title of >= {MIN_TITLE_WORDS} words): overlap "
          f"min {same[0]:.2f}, median {same[len(same) // 2]:.2f}")
    words = [text_words(t) for t in texts]
    nearest = sorted({(s, min(i, j), max(i, j)) for s, i, j in nearest_other(words, titles)}, reverse=True)
    rng = random.Random(0)
    pairs = [rng.sample(range(len(records)), 2) for _ in range(200_000)]
    randoms = sorted(len(words[a] & words[b]) / max(len(words[a] | words[b]), 1) for a, b in pairs)
    median, p99 = np.percentile([s for s, _, _ in nearest], [50, 99])
    print(f"different titles, nearest text ({len(nearest)} pairs): overlap median {median:.2f}, "
          f"99th percentile {p99:.2f}")
    print(f"random pairs (200,000): overlap 99.9th percentile {np.percentile(randoms, 99.9):.2f}, "
          f"max {randoms[-1]:.2f}")
    print("cut | same-paper pairs merged | nearest different-title pairs that would merge | random pairs")
    for cut in CUTS:
        print(f"{cut:.2f} | {sum(s >= cut for s in same)}/{len(same)} | {sum(s >= cut for s, _, _ in nearest)} | "
              f"{sum(s >= cut for s in randoms)}")
    print(f"SAME_TEXT_OVERLAP = {SAME_TEXT_OVERLAP}; the nearest different-title pairs at or above it:")
    for s, i, j in nearest:
        if s < SAME_TEXT_OVERLAP:
            break
        print(f"  {s:.2f}  {titles[i][:60]!r} / {titles[j][:60]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
