"""How often two different papers share a normalised title, by title length, in the 22,148 real abstracts
(../shared/data/ml_abstracts.jsonl.gz): what sets rag_bot/reading/identity.py's MIN_TITLE_WORDS. A pair is "the same paper" when the abstracts' word sets overlap
(Jaccard) at 0.5 or more (the same abstract, or two versions of it), else "different papers".

    .venv/bin/python -m bench.fit.identity_titles
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

from rag_bot.reading.identity import _WORD

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "ml_abstracts.jsonl.gz"


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.casefold()))


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()  # no arguments; --help
    if not DATA.exists():
        print(f"skipped: {DATA} is absent")
        return 0
    groups: dict[str, list[set[str]]] = defaultdict(list)
    for line in gzip.open(DATA, "rt", encoding="utf-8"):
        record = json.loads(line)
        title = " ".join(_WORD.findall(str(record.get("title") or "").casefold()))
        if title:
            groups[title].append(words(str(record.get("abstract") or "")))
    by_len: dict[int, list[float]] = defaultdict(list)
    for title, abstracts in groups.items():
        for a, b in combinations(abstracts, 2):
            by_len[len(title.split())].append(len(a & b) / max(len(a | b), 1))
    print("title words | pairs sharing a title | of them different papers (Jaccard < 0.5) | min Jaccard of same")
    for n in sorted(by_len):
        scores = by_len[n]
        different = [s for s in scores if s < 0.5]
        same = [s for s in scores if s >= 0.5]
        print(f"{n:>3} | {len(scores):>5} | {len(different):>5} | {min(same) if same else '-'}")
    every = [s for n in by_len if n >= 4 for s in by_len[n]]
    print("Jaccard of pairs with >= 4 title words:", sorted(round(s, 2) for s in every))
    return 0


if __name__ == "__main__":
    sys.exit(main())
