"""rag_bot.evaluation.metrics on small hand-made rankings whose values are known."""

from __future__ import annotations

import math

import pytest

from rag_bot.evaluation import metrics


def test_ndcg_is_one_for_the_ideal_ranking_and_zero_without_hits() -> None:
    grades = {"a": 3, "b": 2, "c": 1}
    assert metrics.ndcg_at_k(["a", "b", "c", "x"], grades, 10) == pytest.approx(1.0)
    assert metrics.ndcg_at_k(["x", "y", "z"], grades, 10) == 0.0
    assert metrics.ndcg_at_k(["a", "b"], {}, 10) == 0.0  # no judgments at all
    assert metrics.ndcg_at_k(["a", "b"], {"a": 0, "b": 0}, 10) == 0.0  # only non-relevant judgments


def test_ndcg_uses_graded_gains_with_a_log2_discount() -> None:
    # One relevant paper (grade 1) at rank 2: DCG = 1/log2(3), ideal = 1/log2(2) = 1.
    assert metrics.ndcg_at_k(["x", "a"], {"a": 1}, 10) == pytest.approx(1 / math.log2(3))
    # Swapping a grade-3 and a grade-1 paper costs more than the ideal order.
    swapped = metrics.ndcg_at_k(["c", "a"], {"a": 3, "c": 1}, 10)
    assert 0 < swapped < 1
    assert swapped == pytest.approx((1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_ndcg_ideal_counts_judged_papers_the_ranking_missed() -> None:
    # Two grade-2 papers are judged; finding only one, at rank 1, is not perfect.
    assert metrics.ndcg_at_k(["a", "x"], {"a": 2, "b": 2}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_ndcg_cutoff_ignores_hits_below_k() -> None:
    assert metrics.ndcg_at_k(["x", "y", "a"], {"a": 3}, 2) == 0.0
    assert metrics.ndcg_at_k(["x", "y", "a"], {"a": 3}, 3) == pytest.approx(0.5)


def test_recall_at_k() -> None:
    assert metrics.recall_at_k(["a", "x", "b", "y"], {"a", "b"}, 2) == pytest.approx(0.5)
    assert metrics.recall_at_k(["a", "x", "b", "y"], {"a", "b"}, 3) == pytest.approx(1.0)
    assert metrics.recall_at_k(["a", "x"], {"a", "b", "c", "d"}) == pytest.approx(0.25)  # whole ranking
    assert metrics.recall_at_k(["a", "b"], set(), 5) == 0.0  # nothing relevant
    assert metrics.recall_at_k([], {"a"}, 5) == 0.0


def test_success_at_k() -> None:
    assert metrics.success_at_k(["x", "a"], {"a"}, 1) == 0.0
    assert metrics.success_at_k(["x", "a"], {"a"}, 2) == 1.0
    assert metrics.success_at_k(["a", "b"], {"a", "b"}, 5) == 1.0  # one hit or several: still 1
    assert metrics.success_at_k(["a"], set(), 5) == 0.0


def test_reciprocal_rank() -> None:
    assert metrics.reciprocal_rank(["a", "b"], {"a"}) == 1.0
    assert metrics.reciprocal_rank(["x", "a"], {"a"}) == pytest.approx(0.5)
    assert metrics.reciprocal_rank(["x", "y", "a", "b"], {"a", "b"}) == pytest.approx(1 / 3)  # first hit counts
    assert metrics.reciprocal_rank(["x", "y", "a"], {"a"}, 2) == 0.0  # below the cutoff
    assert metrics.reciprocal_rank(["x", "y"], {"a"}) == 0.0


def test_mean_reciprocal_rank_at_10() -> None:
    rankings = [["a"], ["x", "a"], [*"xxxxxxxxxx", "a"]]  # ranks 1, 2 and 11
    mrr = metrics.mean(metrics.reciprocal_rank(r, {"a"}, 10) for r in rankings)
    assert mrr == pytest.approx((1 + 0.5 + 0) / 3)


def test_average_precision() -> None:
    assert metrics.average_precision(["a", "b", "x"], {"a", "b"}) == pytest.approx(1.0)
    # Hits at ranks 1 and 3: precisions 1 and 2/3.
    assert metrics.average_precision(["a", "x", "b"], {"a", "b"}) == pytest.approx((1 + 2 / 3) / 2)
    # A relevant paper never retrieved counts as zero precision.
    assert metrics.average_precision(["x", "a"], {"a", "b"}) == pytest.approx(0.5 / 2)
    assert metrics.average_precision(["a", "x", "b"], {"a", "b"}, k=2) == pytest.approx(0.5)
    assert metrics.average_precision(["a"], set()) == 0.0


def test_mean() -> None:
    assert metrics.mean([1.0, 0.0, 0.5]) == pytest.approx(0.5)
    assert metrics.mean([True, False, False, False]) == pytest.approx(0.25)
    assert metrics.mean(x for x in (2.0, 4.0)) == pytest.approx(3.0)
    assert metrics.mean([]) is None
