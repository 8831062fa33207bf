"""The grounding stage (rag_bot/ground.py): pure decisions on hand-made rankings, no model or store."""

from __future__ import annotations

import numpy as np
import pytest

from rag_bot.ground import ASK_PAPERS, ground, select_sources, within_reach
from rag_bot.settings import Settings
from rag_bot.types import Paper, ScoredPaper

SETTINGS = Settings(min_score=0.3, refusal_threshold=0.61, answer_papers=6)


def ranked(*similarities: float, named: tuple[int, ...] = (), coverage: float = 0.0) -> list[ScoredPaper]:
    """Papers p0, p1, ... ranked in the given order with the given similarities."""
    return [
        ScoredPaper(paper=Paper(doc_id=f"p{i}", title=f"P{i}", text=f"Abstract {i}.", source="t.txt"),
                    score=1.0 / (i + 1), similarity=s, named=i in named, coverage=coverage if i == 0 else 0.0)
        for i, s in enumerate(similarities)
    ]


def sentences_like(value: float):
    """Sentence vectors whose best similarity to the question vector [1, 0] is `value`."""
    vector = np.array([[value, float(np.sqrt(1 - value**2))]])
    return lambda paper: vector


QUESTION = np.array([1.0, 0.0])


def ids(papers: list[ScoredPaper]) -> list[str]:
    return [p.paper.doc_id for p in papers]


def test_papers_far_below_the_best_or_under_min_score_are_not_cited():
    papers = ranked(0.70, 0.66, 0.55, 0.31, 0.20)
    assert ids(within_reach(papers, margin=0.08, limit=4, min_score=0.3)) == ["p0", "p1"]
    assert ids(within_reach(papers, margin=0.5, limit=4, min_score=0.3)) == ["p0", "p1", "p2", "p3"]
    assert ids(within_reach(papers, margin=0.5, limit=2, min_score=0.3)) == ["p0", "p1"]


def test_a_named_paper_is_cited_whatever_its_similarity():
    papers = ranked(0.70, 0.10, named=(1,))
    assert ids(within_reach(papers, margin=0.08, limit=4, min_score=0.3)) == ["p0", "p1"]


def test_summaries_reach_further_than_direct_answers():
    papers = ranked(0.70, 0.64, 0.60, 0.58, 0.57, 0.56, 0.55, 0.54)
    ask = select_sources(papers, "ask", SETTINGS)
    summary = select_sources(papers, "summary", SETTINGS)
    assert ids(ask) == ["p0", "p1"] and len(ask) <= ASK_PAPERS
    assert ids(summary) == ["p0", "p1", "p2", "p3", "p4", "p5"], "up to answer_papers within the wider margin"
    assert len(select_sources(papers, "summary", SETTINGS, max_papers=3)) == 3


def test_a_comparison_puts_the_named_papers_first_and_always_has_two_sides():
    papers = ranked(0.70, 0.40, 0.65, named=(1, 2))
    assert ids(select_sources(papers, "compare", SETTINGS)) == ["p1", "p2"]
    lone = ranked(0.70, 0.20, 0.10)
    assert ids(select_sources(lone, "compare", SETTINGS)) == ["p0", "p1"]


def test_strong_evidence_grounds_the_question_weak_evidence_declines_it():
    papers = ranked(0.62, 0.40, 0.38, 0.35, 0.33)
    strong = ground(QUESTION, papers, "ask", sentences_like(0.55), SETTINGS)
    assert strong.grounded and ids(strong.sources) == ["p0"]
    weak = ground(QUESTION, ranked(0.45, 0.44, 0.44, 0.43, 0.43), "ask", sentences_like(0.40), SETTINGS)
    assert not weak.grounded and weak.sources == [] and weak.evidence < SETTINGS.refusal_threshold


def test_word_coverage_adds_to_the_evidence():
    plain = ground(QUESTION, ranked(0.5, 0.45, 0.45), "ask", sentences_like(0.5), SETTINGS)
    covered = ground(QUESTION, ranked(0.5, 0.45, 0.45, coverage=1.0), "ask", sentences_like(0.5), SETTINGS)
    assert covered.evidence == pytest.approx(plain.evidence + SETTINGS.refusal_coverage_weight)


def test_enough_evidence_but_no_paper_above_min_score_is_declined_not_a_crash():
    # The words match (coverage) but every paper is below min_score: nothing can be cited.
    papers = ranked(0.28, 0.10, 0.09, coverage=1.0)
    decision = ground(QUESTION, papers, "ask", sentences_like(0.45), SETTINGS)
    assert decision.evidence >= SETTINGS.refusal_threshold
    assert not decision.grounded and decision.sources == []


def test_a_named_paper_grounds_the_question_without_evidence():
    decision = ground(QUESTION, ranked(0.2, 0.1, named=(0,)), "ask", sentences_like(0.1), SETTINGS)
    assert decision.grounded and ids(decision.sources) == ["p0"]


def test_nothing_retrieved_is_declined():
    decision = ground(QUESTION, [], "summary", sentences_like(0.9), SETTINGS)
    assert not decision.grounded and decision.evidence == 0.0


def test_an_area_takes_every_paper_on_topic_and_no_filler():
    from rag_bot.ground import on_topic

    # Three papers about the topic (similar, sentences close, words covered), two only near it.
    papers = ranked(0.60, 0.58, 0.55, 0.50, 0.48)
    for p, cov in zip(papers, (1.0, 0.9, 0.8, 0.1, 0.0)):
        p.coverage = cov
    sentence_sims = {"p0": 0.7, "p1": 0.68, "p2": 0.66, "p3": 0.40, "p4": 0.38}

    def vectors(paper):
        v = sentence_sims[paper.doc_id]
        return np.array([[v, float(np.sqrt(1 - v**2))]])

    assert ids(on_topic(papers, QUESTION, vectors, SETTINGS, limit=40)) == ["p0", "p1", "p2"]
    assert ids(on_topic(papers, QUESTION, vectors, SETTINGS, limit=2)) == ["p0", "p1"]
    # forty on topic: forty cited
    many = ranked(*([0.6] * 40), coverage=1.0)
    for p in many:
        p.coverage = 1.0
    assert len(on_topic(many, QUESTION, sentences_like(0.7), SETTINGS, limit=40)) == 40


def test_a_paper_holding_every_word_of_the_topic_is_in_reach_of_the_area():
    from rag_bot.ground import AREA_REACH, on_topic

    # p1, p2 and p3 are far below the best similarity (a paper whose wording the dense model likes less:
    # "Speculative decoding for mesh generation"). p1 holds all of the topic's words and has a sentence about it as
    # close as the best paper's; p2 holds only some of the words; p3 holds them all but only as common words, with
    # no sentence near the topic ("evaluating" and "models" in a chemistry dataset paper).
    far = 0.60 - AREA_REACH - 0.02
    papers = ranked(0.60, far, far, far)
    for p, cov in zip(papers, (1.0, 1.0, 0.5, 1.0)):
        p.coverage = cov
    sentence_sims = {"p0": 0.70, "p1": 0.66, "p2": 0.66, "p3": 0.70 - AREA_REACH - 0.05}

    def vectors(paper):
        v = sentence_sims[paper.doc_id]
        return np.array([[v, float(np.sqrt(1 - v**2))]])

    assert ids(on_topic(papers, QUESTION, vectors, SETTINGS, limit=40)) == ["p0", "p1"]


def test_a_join_of_concepts_no_paper_holds_is_said_first():
    from rag_bot.ground import missing_combination

    def paper(doc_id: str, text: str) -> ScoredPaper:
        return ScoredPaper(paper=Paper(doc_id=doc_id, title=doc_id, text=text, source="s"), score=1.0, similarity=0.5)

    sae = paper("sae", "We train sparse autoencoders on language model activations.")
    vit = paper("vit", "We prune vision transformers for image classification.")
    both = paper("both", "We train sparse autoencoders on vision transformers.")
    note, chosen = missing_combination("sparse autoencoders for vision transformers", [sae], [sae, vit])
    assert note.startswith("No paper in the collection combines sparse autoencoders with vision transformers")
    assert [p.paper.doc_id for p in chosen] == ["sae", "vit"], "each part gets the paper that covers it"
    assert missing_combination("sparse autoencoders for vision transformers", [both], [both, sae]) == ("", [both])
    note, chosen = missing_combination("speculative decoding for speech recognition", [sae],
                                       [sae, paper("sd", "Speculative decoding drafts tokens.")])
    assert note.startswith("No paper in the collection covers speech recognition") and len(chosen) == 2
    note, chosen = missing_combination("large language models for protein design", [sae],
                                       [paper("llm", "Large language models are trained on text.")])
    assert note == "No paper in the collection covers protein design." and chosen == []
    assert missing_combination("a long question " * 5 + "for protein design", [sae], [sae]) == ("", [sae])


def test_apply_x_to_y_is_the_same_join_as_x_for_y():
    from rag_bot.ground import missing_combination

    kv = ScoredPaper(paper=Paper(doc_id="kv", title="kv", text="We compress the KV cache of long-context models.",
                                 source="s"), score=1.0, similarity=0.5)
    note, chosen = missing_combination("apply KV cache compression to mortgage pricing", [kv], [kv])
    assert note.startswith("No paper in the collection covers mortgage pricing") and chosen == [kv]
    note, _ = missing_combination("KV cache compression applied to mortgage pricing", [kv], [kv])
    assert note.startswith("No paper in the collection covers mortgage pricing")


def test_an_area_qualified_by_an_acronym_leaves_out_the_technique_on_other_systems():
    from rag_bot.ground import on_topic

    # "compressing LLM weights": three papers compress LLMs (one writes the acronym out), two compress other nets.
    texts = ["We quantize LLM weights to 3 bits.", "Pruning large language models without retraining.",
             "Low-rank compression of LLMs.", "Quantization of convolutional networks.", "Pruning CNN filters."]
    papers = ranked(0.60, 0.59, 0.58, 0.57, 0.56)
    for p, text in zip(papers, texts):
        p.paper = Paper(doc_id=p.paper.doc_id, title=p.paper.title, text=text, source="t.txt")
    everything = on_topic(papers, QUESTION, sentences_like(0.7), SETTINGS, limit=40)
    assert ids(everything) == ["p0", "p1", "p2", "p3", "p4"]
    assert ids(on_topic(papers, QUESTION, sentences_like(0.7), SETTINGS, limit=40, acronyms=["LLM"])) == \
        ["p0", "p1", "p2"]
    # Fewer than two papers hold it: the area is left as it was (nothing to tell the papers apart by).
    assert ids(on_topic(papers, QUESTION, sentences_like(0.7), SETTINGS, limit=40, acronyms=["GNN"])) == \
        ids(everything)



def test_an_area_joining_concepts_keeps_the_papers_of_the_combination():
    from rag_bot.ground import on_topic
    from rag_bot.text import question_concepts

    def area(topic: str, *texts: str) -> list[str]:
        papers = ranked(*(0.6 - 0.01 * i for i in range(len(texts))))
        for p, text in zip(papers, texts):
            p.paper = Paper(doc_id=p.paper.doc_id, title=p.paper.title, text=text, source="t.txt")
        concepts = [stems for _, stems, _ in question_concepts(topic)]
        return ids(on_topic(papers, QUESTION, sentences_like(0.7), SETTINGS, limit=40, concepts=concepts))

    # Two papers hold both concepts: the LoRA papers without federated learning and the federated ones without
    # LoRA are left out.
    assert area("federated fine-tuning with LoRA",
                "Federated fine-tuning of LLMs with LoRA adapters per client.", "Low-rank adaptation (LoRA) dynamics.",
                "Federated LoRA with rotation-aligned fine-tuning.", "Federated learning with fine-tuning on devices.") \
        == ["p0", "p2"]
    # One paper holds both ("unsafe" is not "safety" to a word check): the papers of the concept the fewest hold,
    # the audio models, are the area; safety papers on text-only LLMs are not.
    assert area("safety for large audio-language models",
                "Safety alignment for large audio-language models.", "Safety of LLM fine-tuning.",
                "Audio-language models judge unsafe spoken dialogue.", "Jailbreak safety for chat LLMs.",
                "Safety guard models for 17 languages.") == ["p0", "p2"]
    # No paper holds both: the area is left whole (grounding then says what the collection lacks).
    assert area("speculative decoding for speech recognition",
                "Speculative decoding with draft models.", "Speech recognition with recurrent networks.",
                "Speculative decoding trees.") == ["p0", "p1", "p2"]


def papers_about(*texts: str, similarities: tuple[float, ...] = (0.55, 0.45, 0.45, 0.45, 0.45)) -> list[ScoredPaper]:
    return [ScoredPaper(paper=Paper(doc_id=f"f{i}", title=f"F{i}", text=text, source="t.txt"), score=1.0 / (i + 1),
                        similarity=s) for i, (text, s) in enumerate(zip(texts, similarities, strict=False))]


AGENT_PAPERS = papers_about(
    "Multi-agent systems of LLM agents coordinate tool calls; accuracy and latency depend on the execution plan.",
    "Agents learn reusable procedural skills from interaction experience.",
    "We schedule inference requests by predicted output length.",
    "A benchmark of coding agents over many milestones.",
    "Optimizers for pretraining.",
)


def test_a_short_question_whose_words_the_closest_papers_lack_needs_stronger_evidence():
    # Evidence 0.68 (best sentence 0.58 + margin 0.10): over the refusal threshold, under the focus threshold.
    sentences = sentences_like(0.58)
    near_miss = ground(QUESTION, AGENT_PAPERS, "ask", sentences, SETTINGS,
                       topic="debating LLM agents and factual accuracy")
    assert SETTINGS.refusal_threshold <= near_miss.evidence < SETTINGS.focus_threshold
    assert not near_miss.grounded and near_miss.sources == []
    assert "debating" in near_miss.missing and "factual" in near_miss.missing, "the refusal says which words are missing"
    # The same evidence for words the papers hold is an answer; so is stronger evidence for the near miss.
    held = ground(QUESTION, AGENT_PAPERS, "ask", sentences, SETTINGS, topic="LLM agents coordinating tool calls")
    assert held.grounded and held.missing == ""
    strong = ground(QUESTION, AGENT_PAPERS, "ask", sentences_like(0.70), SETTINGS,
                    topic="debating LLM agents and factual accuracy")
    assert strong.evidence >= SETTINGS.focus_threshold and strong.grounded


def test_the_focus_check_leaves_long_questions_names_and_joins_of_concepts_alone():
    sentences = sentences_like(0.58)
    long_topic = ("my agents keep arguing with each other in a debate before they answer and I want them to agree "
                  "faster on factual questions")
    assert ground(QUESTION, AGENT_PAPERS, "ask", sentences, SETTINGS, topic=long_topic).grounded
    named = papers_about(*(p.paper.text for p in AGENT_PAPERS))
    named[0] = ScoredPaper(paper=named[0].paper, score=1.0, similarity=0.55, named=True)
    assert ground(QUESTION, named, "ask", sentences, SETTINGS, topic="TIPEX agents that debate").grounded
    # "X for Y" with Y nowhere: the answer says which part is missing instead of declining.
    join = ground(QUESTION, AGENT_PAPERS, "summary", sentences, SETTINGS, topic="LLM agents for tomato farming")
    assert join.grounded and "tomato farming" in join.missing


def test_british_spellings_count_as_held():
    from rag_bot.ground import unheld_words

    papers = papers_about("We steer model behavior and analyze internal activations to optimize refusal defenses.")
    unheld, share = unheld_words("steering model behaviour to optimise defences", papers)
    assert unheld == [] and share == 0.0
    unheld, share = unheld_words("steering behaviour in chess engines", papers)
    assert unheld == ["chess", "engines"] and share == pytest.approx(2 / 4)
