"""The answer words (rag_bot/answer_words.py): what each certainty may claim, and the helpers readers of answers use."""

from __future__ import annotations

import pytest

from rag_bot import answer_words as words
from rag_bot.types import CERTAINTIES


def test_every_certainty_has_a_plain_label():
    assert set(words.CERTAINTY_LABELS) == set(CERTAINTIES)
    assert len(set(words.CERTAINTY_LABELS.values())) == len(CERTAINTIES), "each told apart in words"
    for certainty in CERTAINTIES:
        assert words.CERTAINTY_LABELS[certainty] in words.certainty_line(certainty)
        assert words.CERTAINTY_LABELS[certainty] in words.certainty_label(certainty)


@pytest.mark.parametrize(("close", "related", "arrangement"), [(1, 0, "plain"), (5, 3, "themes"), (8, 10, "central themes")])
def test_a_summary_opening_counts_what_matches_closely_never_what_the_collection_holds(close, related, arrangement):
    opening = words.summary_opening(close, related, arrangement, central=6, rest=2)
    assert opening.startswith(str(close))
    assert (words.SUMMARY_RELATED.format(count=related) in opening) is bool(related)
    for complete in ("The collection holds", "in the collection are on this", "all the papers"):
        assert complete not in opening


def test_only_the_refusal_templates_say_the_collection_does_not_cover():
    refusals = (words.NOT_COVERED, words.LACKS_ALL, words.LACKS_PART, words.LACKS_COMBINATION)
    for template in refusals:
        assert template.startswith(words.MISSING_OPENINGS)
    for template in (words.TENTATIVE_LEAD, words.TENTATIVE_CHECK, words.SUMMARY_CLOSE, words.RELATED_HEADING,
                     words.OTHER_PAPERS):
        assert "cover" not in template and not template.startswith(words.MISSING_OPENINGS)


def test_states_missing_reads_the_first_line_after_notes():
    lacking = words.LACKS_ALL.format(lacking="protein design")
    assert words.states_missing(lacking + " More.")
    assert words.states_missing("_" + words.FILTER_NOTE.format(filters="year 2026", matching=3, total=38) + "_\n\n"
                                + lacking)
    assert not words.states_missing(words.TENTATIVE_LEAD.format(title="X", ref="[1]", sentence="“s”"))
    assert not words.states_missing("")


def test_a_probability_is_shown_with_two_decimals_or_not_at_all():
    assert words.probability_text(0.734) == "probability 0.73"
    assert words.probability_text(None) == ""
