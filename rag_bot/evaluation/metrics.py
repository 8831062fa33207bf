"""Ranking metrics shared by `rag-bot eval` and the benches: pure functions over ranked ids and judgments.

A ranking is a sequence of document ids, best first. `relevant` is the set of ids judged relevant (binary
metrics); `grades` maps judged ids to graded gains (nDCG). `k=None` means the whole ranking.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence


def _top(ranking: Sequence[str], k: int | None) -> Sequence[str]:
    """The first k ids of a ranking (all of them when k is None)."""
    return ranking if k is None else ranking[:k]


def dcg(gains: Iterable[float]) -> float:
    """Discounted cumulative gain of gains in rank order (log2 discount: rank r weighs 1 / log2(r + 1))."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at_k(ranking: Sequence[str], grades: Mapping[str, float], k: int) -> float:
    """nDCG@k with graded gains; the ideal ranks all graded judgments best first (0.0 when none is positive)."""
    ideal = dcg(sorted((g for g in grades.values() if g > 0), reverse=True)[:k])
    return dcg(grades.get(doc, 0) for doc in ranking[:k]) / ideal if ideal > 0 else 0.0


def recall_at_k(ranking: Sequence[str], relevant: Collection[str], k: int | None = None) -> float:
    """Share of the relevant ids found in the top k (0.0 when nothing is relevant)."""
    wanted = set(relevant)
    return len(wanted & set(_top(ranking, k))) / len(wanted) if wanted else 0.0


def success_at_k(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    """1.0 when any relevant id is in the top k, else 0.0."""
    wanted = set(relevant)
    return 1.0 if any(doc in wanted for doc in ranking[:k]) else 0.0


def reciprocal_rank(ranking: Sequence[str], relevant: Collection[str], k: int | None = None) -> float:
    """1 / rank of the first relevant id within the top k (0.0 when there is none); its mean is MRR@k."""
    wanted = set(relevant)
    return next((1.0 / rank for rank, doc in enumerate(_top(ranking, k), start=1) if doc in wanted), 0.0)


def average_precision(ranking: Sequence[str], relevant: Collection[str], k: int | None = None) -> float:
    """Mean of precision at each relevant id's rank over all relevant ids (unretrieved ones count 0)."""
    wanted = set(relevant)
    hits, total = 0, 0.0
    for rank, doc in enumerate(_top(ranking, k), start=1):
        if doc in wanted:
            hits += 1
            total += hits / rank
    return total / len(wanted) if wanted else 0.0


def mean(values: Iterable[float]) -> float | None:
    """Arithmetic mean (None for no values)."""
    items = list(values)
    return math.fsum(items) / len(items) if items else None
