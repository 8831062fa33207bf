"""Quotes that read on their own (rag_bot/writing/quotes.py): lead-ins dropped, the rest kept verbatim."""

from __future__ import annotations

import pytest

from rag_bot.writing.quotes import clean_quote, quoted, reads_alone


@pytest.mark.parametrize(("sentence", "expected"), [
    ("However, prior methods need labelled pairs for every language they support.",
     "prior methods need labelled pairs for every language they support."),
    ("Moreover the bound holds for every convex loss we consider here.",
     "the bound holds for every convex loss we consider here."),
    ("To that end, we collect ten thousand annotated dialogues from forums.",
     "we collect ten thousand annotated dialogues from forums."),
    ("Driven by this observation, we design a sampler that reuses past rollouts.",
     "we design a sampler that reuses past rollouts."),
    ("In particular, to address these gaps, we train a verifier on synthetic proofs.",
     "we train a verifier on synthetic proofs."),
])
def test_a_dangling_lead_in_is_dropped_and_the_rest_is_kept_verbatim(sentence: str, expected: str) -> None:
    assert clean_quote(sentence) == expected
    assert sentence.endswith(clean_quote(sentence))


@pytest.mark.parametrize("sentence", [
    "Further experiments show the sampler generalises to unseen tasks.",  # "Further" is not a connective here
    "Such methods, however, fail when the context is long.",  # the clause is the sentence's subject
    "In this paper, we propose a sampler that reuses past rollouts.",  # "this paper" names what it means
    "Despite progress in retrieval, dense models miss rare entities in long documents.",  # names what it means
    "Thus.",  # nothing would be left
])
def test_a_lead_in_that_the_sentence_needs_is_kept(sentence: str) -> None:
    assert clean_quote(sentence) == sentence


def test_a_quote_pointing_at_what_it_does_not_name_is_flagged() -> None:
    assert not reads_alone("These gains hold across five model sizes.")
    assert not reads_alone("It converges twice as fast as Adam.")
    assert reads_alone("This paper studies sparse attention.")
    assert reads_alone("Sparse attention halves memory use.")


def test_the_shown_quote_is_capitalised_only_when_a_lead_in_was_dropped() -> None:
    assert quoted("However, we find the opposite on code tasks.") == (
        "we find the opposite on code tasks.", "We find the opposite on code tasks.")
    assert quoted("k-means clusters the vectors of every abstract.") == (
        "k-means clusters the vectors of every abstract.",) * 2


def test_a_quote_pointing_back_brings_the_sentence_it_points_to() -> None:
    before = "Federated methods share one adapter across all clients."
    quote, shown = quoted("They ignore how much each client wants to personalise.", before)
    assert quote == shown == f"{before} They ignore how much each client wants to personalise."
    # Not when the sentence before points back too, or when the quote reads alone.
    assert quoted("They ignore it.", "These methods share adapters.")[0] == "They ignore it."
    assert quoted("Clients differ.", before)[0] == "Clients differ."
