"""Retrieval over the real seed index: the right paper comes first for questions a user would ask."""

from __future__ import annotations

import pytest

from tests.conftest import paper_with

# Questions written in plain words, avoiding each abstract's own key terms; (question, fragment that
# identifies the expected paper, how high it must rank).
PARAPHRASED = [
    ("How can a model decide which stored attention entries to discard when memory for long prompts runs out?",
     "CapKV", 3),
    ("Generating 3D polygon shapes piece by piece is slow; can several pieces be guessed at once without "
     "hurting shape quality?", "XSpecMesh", 1),
    ("Adjusting the proportions of different data sources on the fly while pretraining, with a learned policy",
     "AC-ODM", 1),
    ("When queuing requests to a language model server, how to account for not knowing how long each reply "
     "will be?", "Tail Inflated Expectation", 1),
    ("Speeding up attention on very long inputs by turning keys into compact bit codes with no training",
     "BinaryPC", 1),
    ("Training large networks end to end in 4-bit floating point on the newest NVIDIA chips", "Quartet II", 1),
    ("How well do language models plan routes to make drug molecules in the lab?", "CREED", 1),
    ("Reducing how many test questions are needed to rank language models by choosing the most informative ones",
     "ATLAS", 1),
    ("Estimating how long a person would need for a task from how AI systems score on benchmarks", "BRIDGE", 1),
    ("Can coding agents keep a software project healthy as it evolves through many successive changes?",
     "DeepCommit", 1),
    ("Stopping voice assistants from answering dangerous spoken requests without refusing harmless ones",
     "SARSteer", 1),
    ("Product suggestion systems that merge graph neighbours with language-model meaning", "CCLRec", 1),
    ("small models specialised for security threat analysis", "CyberPal 2.0", 1),
    ("Averaging low-rank adapters from many devices goes wrong because the factors can be rotated",
     "FedRot-LoRA", 1),
]


@pytest.mark.parametrize(("question", "fragment", "within"), PARAPHRASED, ids=[f for _, f, _ in PARAPHRASED])
def test_paraphrased_question_ranks_the_right_paper_high(engine, question, fragment, within):
    expected = paper_with(engine, fragment)
    ranked = [sp.paper.doc_id for sp in engine.retriever.retrieve_papers(question)]
    assert expected in ranked[:within], (
        f"{fragment} should rank in the top {within} for {question!r}; got {ranked[:5]}"
    )


@pytest.mark.parametrize(
    ("question", "alias"),
    [
        ("What does Quartet 2 do?", "Quartet II"),
        ("how is quartet-ii trained", "Quartet II"),
        ("What does Corr Steer select?", "CorrSteer"),
        ("how does capkv work", "CapKV"),
        ("what is CORRSTEER evaluated on", "CorrSteer"),
        ("Tell me about Het-CPFLoRA", "Het-CPFLoRA"),
    ],
)
def test_named_paper_is_found_however_it_is_spelled(engine, question, alias):
    expected = paper_with(engine, alias)
    ranked = engine.retriever.retrieve_papers(question)
    assert ranked[0].paper.doc_id == expected
    assert ranked[0].named is True
    assert not any(sp.named for sp in ranked[1:]), "only the named paper should be flagged as named"


@pytest.mark.parametrize(
    ("question", "first", "second"),
    [
        ("Compare CorrSteer and SARSteer", "CorrSteer", "SARSteer"),
        ("How does CapKV differ from BinaryPC?", "CapKV", "BinaryPC"),
        ("compare quartet-ii with CAT", "Quartet II", "CAT"),
        ("LED vs LVE for reasoning models", "LED", "LVE"),
    ],
)
def test_comparison_question_retrieves_both_named_papers_first(engine, question, first, second):
    expected = {paper_with(engine, first), paper_with(engine, second)}
    ranked = engine.retriever.retrieve_papers(question)
    assert {sp.paper.doc_id for sp in ranked[:2]} == expected
    assert all(sp.named for sp in ranked[:2])


def test_ordinary_capitalised_word_is_not_mistaken_for_a_paper_name(engine):
    # "cat" / "echo" as plain words must not pull in the CAT or ECHO papers as named.
    ranked = engine.retriever.retrieve_papers("my cat keeps making an echo in the hallway")
    assert not any(sp.named for sp in ranked)


@pytest.mark.parametrize(
    "question",
    [
        "What does the collection say about sparse autoencoders?",
        "Summarize the work on making LLM inference cheaper",
        "Compare CorrSteer and SARSteer",
        "How do I make a sourdough bread starter?",
    ],
)
def test_results_are_distinct_papers_at_most_ten_best_first(engine, question):
    ranked = engine.retriever.retrieve_papers(question)
    ids = [sp.paper.doc_id for sp in ranked]
    assert 1 <= len(ids) <= 10
    assert len(ids) == len(set(ids)), "a paper must appear once, not once per chunk"
    scores = [sp.score for sp in ranked]
    assert scores == sorted(scores, reverse=True)
    assert all(doc_id in engine.retriever.papers for doc_id in ids)


def test_llama_index_retriever_returns_paper_nodes(engine):
    nodes = engine.retriever.retrieve("What does Corr Steer select?")
    ids = [n.node.node_id for n in nodes]
    assert ids[0] == paper_with(engine, "CorrSteer")
    assert len(ids) == len(set(ids)) and len(ids) <= 10
    # the node holds the whole abstract, not a chunk of it
    assert nodes[0].node.get_content() == engine.retriever.papers[ids[0]].text


def test_dense_mode_keeps_the_word_coverage_grounding_needs(seed_storage, engine):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    dense = Engine(Settings(storage=seed_storage, retrieval="dense"), index=engine.index)
    question = "Which method selects steering features by correlating them with task outcomes?"
    top = dense.retriever.retrieve_papers(question)[0]
    assert top.coverage > 0.3, "the lexical statistics exist even when only the dense ranking is used"
    assert top.coverage == engine.retriever.retrieve_papers(question)[0].coverage


def test_a_name_only_one_abstract_mentions_finds_that_paper(engine):
    # EvoClaw is the benchmark of the DeepCommit abstract ("These executable sequences enable EvoClaw, …"): not
    # one of the paper's derived names, but no other abstract has the word, so asking about it names the paper.
    expected = paper_with(engine, "EvoClaw")
    assert "EvoClaw" not in engine.retriever.papers[expected].aliases
    ranked = engine.retriever.retrieve_papers("What is the Evo-Claw benchmark measuring?")
    assert ranked[0].paper.doc_id == expected and ranked[0].named


def test_a_name_several_abstracts_mention_names_none_of_them(engine):
    holders = [d for d, p in engine.retriever.papers.items() if "LoRA" in p.text]
    assert len(holders) >= 2  # the word is shared, so it points at no single paper
    ranked = engine.retriever.retrieve_papers("which papers use LoRA adapters?")
    assert not any(sp.named for sp in ranked)


def test_a_british_spelling_finds_what_the_american_one_does(seed_storage, engine):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    # The seed abstracts write "behavior" and "generalization"; a British question must rank and cover them alike.
    bm25 = Engine(Settings(storage=seed_storage, retrieval="bm25"), index=engine.index)
    british = bm25.retriever.retrieve_papers("steering model behaviour and its generalisation")
    american = bm25.retriever.retrieve_papers("steering model behavior and its generalization")
    assert [p.paper.doc_id for p in british[:5]] == [p.paper.doc_id for p in american[:5]]
    assert british[0].coverage == american[0].coverage > 0


def test_a_word_cut_short_in_an_abstract_still_counts_as_the_question_s_word(engine):
    # ECHO's abstract opens with "Speculative Decodin": it is about speculative decoding and must cover both words,
    # as fully as a paper spelling them out, for its relevance to an area on speculative decoding.
    papers = {p.paper.title.split(":")[0]: p for p in engine.retriever.retrieve_papers("speculative decoding", 40)}
    assert papers["ECHO"].coverage == papers["XSpecMesh"].coverage == 1.0
    # A word cut by a real ending is another word: "processor" is not held by "process".
    forms = engine.retriever._cut_forms(engine.retriever._snapshot, "speculative decoding processor models")
    assert forms == {"decod": {"decodin"}}
