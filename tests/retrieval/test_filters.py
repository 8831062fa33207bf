"""Filters by venue, year, author and source: parsed from user input, applied inside the store and BM25, stated in
the answer, and never widened to the whole collection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_bot import answer_words as words
from rag_bot.types import Filters, Paper


def test_filters_parse_years_and_reject_nonsense():
    assert Filters.parse() is None
    f = Filters.parse(venue=" ICML ", year="2024-2026")
    assert f is not None and (f.venue, f.year_min, f.year_max) == ("ICML", 2024, 2026)
    assert Filters.parse(year="2025").describe() == "year 2025"
    assert Filters.parse(year="2024-").year_max is None and Filters.parse(year="-2023").year_min is None
    for bad in ("abc", "2026-2020", "20x5", "1", "-5", "20266", "-"):  # a year has four digits
        with pytest.raises(ValueError):
            Filters.parse(year=bad)


def test_filters_match_case_insensitively_on_parts_of_fields():
    paper = Paper(doc_id="x", title="t", text="a", source="icml2019.jsonl", venue="ICML", year=2019,
                  authors=["Alan M. Turing"])
    assert Filters.parse(venue="icml", year="2018-2019", author="turing", source="2019").matches(paper)
    assert not Filters.parse(year="2020-").matches(paper)
    assert not Filters.parse(author="lovelace").matches(paper)
    assert not Filters.parse(venue="NeurIPS").matches(paper)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, seed_storage):
    """The seeds (ICML 2026, from their header) plus two JSONL papers of other venues and years."""
    import shutil

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    store = tmp_path_factory.mktemp("filters") / "store"
    shutil.copytree(seed_storage, store)
    extra = tmp_path_factory.mktemp("extra") / "older.jsonl"
    records = [
        {"id": "old-steer", "title": "SteerX: sparse autoencoder steering", "venue": "NeurIPS", "year": 2019,
         "authors": ["Ada Lovelace"], "abstract": "We propose SteerX, which steers the activations of language "
         "models with sparse autoencoder features selected by correlation with task success, improving HarmBench "
         "refusal by 10 points."},
        {"id": "old-kv", "title": "Old KV cache eviction", "venue": "ACL", "year": 2021, "authors": ["Alan Turing"],
         "abstract": "We study KV cache eviction for long-context inference and propose a capacity-aware policy that "
         "keeps the most informative tokens, halving memory at equal accuracy."},
    ]
    extra.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    engine = Engine(Settings(storage=store))
    engine.ingest([extra])
    return engine


def test_seed_papers_carry_the_venue_and_year_of_their_header(engine):
    assert {(p.venue, p.year) for p in engine.papers.values()} == {("ICML", 2026)}


def test_a_filter_limits_retrieval_inside_the_store(mixed):
    question = "steering language model activations with sparse autoencoder features"
    everyone = [p.paper.doc_id for p in mixed.retriever.retrieve_papers(question)]
    assert "old-steer" in everyone[:3]
    icml = mixed.retriever.retrieve_papers(question, filters=Filters.parse(venue="ICML"))
    assert icml and all(p.paper.venue == "ICML" for p in icml)
    older = mixed.retriever.retrieve_papers(question, filters=Filters.parse(year="-2020"))
    assert [p.paper.doc_id for p in older] == ["old-steer"], "BM25 and Chroma both searched only the 2019 paper"
    by_author = mixed.retriever.retrieve_papers("KV cache eviction", filters=Filters.parse(author="turing"))
    assert [p.paper.doc_id for p in by_author] == ["old-kv"]


def test_the_answer_states_its_filter_and_a_filter_matching_nothing_answers_nothing(mixed):
    answer = mixed.ask("What does SteerX improve?", filters=Filters.parse(venue="neurips"))
    assert answer.answer.startswith(f"_{words.FILTER_NOTE.format(filters='venue neurips', matching=1, total=40)}_")
    assert [c.doc_id for c in answer.citations] == ["old-steer"]
    assert answer.to_json()["filters"]["venue"] == "neurips"
    none = mixed.ask("What does SteerX improve?", filters=Filters.parse(year="2030"))
    assert not none.grounded and none.citations == [] and none.retrieved == []
    assert words.NO_PAPER_MATCHES_FILTER.format(filters="year 2030") in none.answer
    assert "filters" not in mixed.ask("What does SteerX improve?").to_json()


def test_cli_filter_flags(mixed):
    import os
    import subprocess
    import sys

    rag_bot = str(Path(sys.executable).parent / "rag-bot")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(mixed.settings.storage)
    run = subprocess.run([rag_bot, "ask", "--json", "--year", "2019", "steering with sparse autoencoders"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [c["doc_id"] for c in json.loads(run.stdout)["citations"]] == ["old-steer"]
    bad = subprocess.run([rag_bot, "ask", "--year", "soon", "x"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 2 and "year must be YYYY" in bad.stderr


def test_a_filter_larger_than_chroma_can_take_as_a_list_ranks_as_the_list_does(mixed, monkeypatch):
    """A filter letting through more papers than a Chroma query may list (SQLite's limit on variables: at 300,000
    papers a filter of three years failed) asks for more neighbours and keeps the allowed ones: the same papers in
    the same order as the exact list, and Chroma never receives a list over the limit."""
    from rag_bot.retrieval.retrieve import PaperRetriever

    question = "steering language model activations with sparse autoencoder features"
    filters = Filters.parse(venue="ICML")
    listing = PaperRetriever(mixed.index, mixed.settings, list_above=0)  # the list, exact
    exact = [(p.paper.doc_id, p.score) for p in listing.retrieve_papers(question, filters=filters)]
    listed: list[int] = []
    for collection in (mixed.index.papers, mixed.index.chunks):
        real = collection.query

        def spy(*args, _real=real, **kwargs):
            where = kwargs.get("where") or {}
            listed.append(len(kwargs.get("ids") or where.get("doc_id", {}).get("$in", [])))
            return _real(*args, **kwargs)

        monkeypatch.setattr(collection, "query", spy, raising=False)
    wide_filter = PaperRetriever(mixed.index, mixed.settings, list_above=10**9, in_limit=5)
    wide = [(p.paper.doc_id, p.score) for p in wide_filter.retrieve_papers(question, filters=filters)]
    assert wide == exact and len(wide) == 10
    assert listed and max(listed) == 0, "38 allowed papers, over the limit of 5: no list was sent"
    assert all(mixed.papers[d].venue == "ICML" for d, _ in wide)
