"""Questions read as people type them (rag_bot/retrieval/spelling.py): misspelt words corrected against the
collection's own words, real words left alone, and the correction shown."""

from __future__ import annotations

import pytest

from rag_bot import answer_words as words
from rag_bot.retrieval.spelling import Spelling, SpellingCounts, max_edits
from tests.conftest import paper_with


def spelling_of(*texts: str) -> Spelling:
    counts = SpellingCounts()
    counts.add(texts)
    return Spelling(words=sorted(counts.counts), counts=[counts.counts[w] for w in sorted(counts.counts)],
                    forms=counts.forms)


COLLECTION = spelling_of("We introduce CorrSteer, which selects steering features by correlating task outcomes.",
                         "Speculative decoding accelerates inference; speculative decoding drafts tokens.",
                         "A collection of federated LoRA adapters.")


@pytest.mark.parametrize(("typed", "meant"), [
    ("featrues", "features"),  # two letters swapped: one edit
    ("speculatve", "speculative"),  # one dropped
    ("decodng", "decoding"),
    ("colection", "collection"),
    ("corsteer", "CorrSteer"),  # a name, written as the paper writes it
])
def test_a_misspelt_word_becomes_the_collections_nearest(typed, meant):
    assert COLLECTION.suggestion(typed) == meant
    fixed = COLLECTION.correct(f"what does the paper say about {typed}?")
    assert fixed is not None and fixed.text == f"what does the paper say about {meant}?"
    assert fixed.changes == ((typed, meant),)


@pytest.mark.parametrize("word", ["baking", "bread", "protein", "features", "the", "LoRA", "xyzzyqq"])
def test_a_word_english_or_the_collection_knows_and_one_near_nothing_are_kept(word):
    assert COLLECTION.suggestion(word) is None
    assert COLLECTION.correct(f"papers about {word}") is None


def test_the_edit_budget_grows_with_the_word():
    assert max_edits("lora") == 1 and max_edits("speculative") == 2
    assert COLLECTION.suggestion("spculatve") == "speculative", "two edits in a long word"
    assert COLLECTION.suggestion("dcodng") is None, "two edits in a word under eight letters: too far"


def test_the_counts_travel_with_the_lexicon(tmp_path):
    counts = SpellingCounts()
    counts.add(["CorrSteer steers; CorrSteer selects."])
    counts.save(tmp_path)
    loaded = Spelling.load(tmp_path)
    assert loaded is not None and loaded.suggestion("corsteer") == "CorrSteer"
    assert Spelling.load(tmp_path / "absent") is None


# --- through the engine: the seeds --------------------------------------------------------------------------------
def test_a_question_with_typos_is_answered_as_its_spelled_right_twin_and_says_what_it_searched(engine):
    right = engine.ask("what is CorrSteer and how does it pick features?")
    typed = engine.ask("what is corsteer and how does it pick featrues?")
    assert typed.searched_for == "what is CorrSteer and how does it pick features?"
    assert typed.question == "what is corsteer and how does it pick featrues?", "the question as the user typed it"
    assert typed.certainty == right.certainty == "confident"
    assert [c.doc_id for c in typed.citations] == [c.doc_id for c in right.citations]
    assert typed.citations[0].doc_id == paper_with(engine, "CorrSteer")
    assert typed.to_json()["searched_for"] == typed.searched_for
    assert right.searched_for is None


def test_the_cli_shows_what_it_searched_for(seed_storage, monkeypatch, capsys):
    from tests.conftest import run_main

    code, out, _ = run_main(monkeypatch, capsys, seed_storage, "ask", "explain speculatve decodng")
    assert code == 0
    assert words.SEARCHED_FOR.format(question="explain speculative decoding") in out


def test_spelling_can_be_turned_off(seed_storage):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    off = Engine(Settings(storage=seed_storage, spelling=False))
    assert off.ask("what is corsteer?").searched_for is None
