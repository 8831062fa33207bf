"""A paper asked for by its name ("What is RULER?", "Compare RULER and REBAR.") is found first and answered: the
name its title starts with ("RULER: What's the Real Context Size ...") is looked up, not guessed by similarity; a
name no paper goes by is declined, and an ordinary word that is also a name (mentor) names nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_bot.answer_words import states_missing

# Real-looking self-named papers (titles as published; abstracts shortened): none says "we propose NAME".
NAMED = {
    "ruler": ("RULER: What's the Real Context Size of Your Long-Context Language Models?",
              "The needle-in-a-haystack test, which retrieves a piece of information from long distractor texts, is "
              "widely used to evaluate long-context language models, but it only probes a superficial form of "
              "understanding. A new synthetic benchmark with configurable sequence length and task complexity adds "
              "multi-hop tracing and aggregation; models that pass the needle test drop sharply as contexts grow."),
    "rebar": ("REBAR: Low-variance, unbiased gradient estimates for discrete latent variable models",
              "Learning in models with discrete latent variables is hard because gradient estimators have high "
              "variance. Control variates reduce the variance of the REINFORCE estimator, and continuous relaxations "
              "give low-variance but biased estimates. A novel control variate combines the two into unbiased, "
              "low-variance gradient estimates, and the tightness of the relaxation is adapted online."),
    "wattle": ("WATTLE: A Trainable Gain Analogue VLSI Neural Network",
               "A low power analogue VLSI perceptron with three layers, multiplying DAC synapses and on-chip switched "
               "capacitor neurons with a variable gain per neuron, fabricated in CMOS. The chip is meant to classify "
               "intra-cardiac electrograms in an implantable pacemaker and uses 10 pJ per connection."),
    "mentor": ("MENTOR: A Bayesian Model for Prediction and Intervention in Mental Retardation",
               "Mental retardation is a complex medical and social problem whose causes are poorly understood. A "
               "Bayesian network built with clinicians predicts the risk of mental retardation in children from "
               "prenatal and family factors and suggests interventions."),
    "mentoring": ("Peer mentoring for first-year graduate students",
                  "A mentor paired with each first-year student improved retention: mentoring by senior students "
                  "raised completion rates in a two-year study of graduate programs."),
}


@pytest.fixture(scope="module")
def named_engine(seed_storage: Path, tmp_path_factory: pytest.TempPathFactory):
    """The seeds (a copy of the session's store) plus the self-named papers, embedded with the real model."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    folder = tmp_path_factory.mktemp("named")
    shutil.copytree(seed_storage, folder / "store")
    records = folder / "named.jsonl"
    records.write_text("".join(json.dumps({"id": key, "title": title, "abstract": abstract}) + "\n"
                               for key, (title, abstract) in NAMED.items()), encoding="utf-8")
    engine = Engine(Settings(storage=folder / "store"))
    engine.ingest([records])
    return engine


@pytest.mark.parametrize("name", ["RULER", "MENTOR"])
def test_a_paper_asked_for_by_its_title_name_is_answered_first(named_engine, name):
    answer = named_engine.ask(f"What is {name}?")
    assert answer.grounded, answer.answer
    assert answer.citations[0].doc_id == name.lower()
    assert answer.answer.startswith(f"**{NAMED[name.lower()][0]}**")


@pytest.mark.parametrize("question", ["Compare RULER and REBAR.", "How does WATTLE differ from MENTOR?"])
def test_a_comparison_of_two_names_cites_both(named_engine, question):
    answer = named_engine.ask(question)
    names = [w.lower() for w in question.rstrip(".?").split() if w.isupper()]
    assert answer.mode == "compare" and answer.grounded, answer.answer
    assert {c.doc_id for c in answer.citations} >= set(names)
    assert answer.certainty == "confident" and not states_missing(answer.answer)


def test_only_a_name_a_paper_goes_by_names_a_paper(named_engine):
    # A name no paper goes by is declined; "mentor" as a word names nothing, MENTOR as a name does.
    answer = named_engine.ask("What is FOOBARNET?")
    assert not answer.grounded and not answer.citations
    assert "FOOBARNET" in answer.answer
    ranked = named_engine.retriever.retrieve_papers("How does a mentor help first-year graduate students?")
    assert not any(p.named for p in ranked)
    assert ranked[0].paper.doc_id == "mentoring"
    assert named_engine.retriever.retrieve_papers("What is MENTOR?")[0].named


def test_a_concept_of_the_field_names_a_paper_only_when_asked_for_alone():
    # "SGD: General Analysis ..." goes by SGD, which 300 of 1,000 abstracts use: "What is SGD?" asks for the paper,
    # "SGD for sparse models" for the concept.
    from rag_bot.retrieval.names import NameIndex, Usage
    from rag_bot.topics import word_stems
    from rag_bot.types import Paper

    paper = Paper(doc_id="sgd", title="SGD: General Analysis and Improved Rates", source="test",
                  text="A general analysis of stochastic gradient descent covering many variants.")
    names, usage = NameIndex.build([paper]), Usage(df={"sgd": 300}, papers=1000, stem=word_stems)
    assert names.find("What is SGD?", usage=usage) == ["sgd"]
    assert names.find("Does SGD generalise better than adaptive methods for sparse models?", usage=usage) == []
