"""Answers as a user reads them: cited, grounded in the abstracts, in the mode asked for."""

from __future__ import annotations

import re
from functools import lru_cache

import pytest

from rag_bot import answer_words as words
from rag_bot.answer_words import states_missing
from rag_bot.question import detect_mode
from rag_bot.text import clean_markup, split_sentences
from rag_bot.writing.quotes import quoted
from tests.conftest import ROOT, paper_with

CITE = re.compile(r"\[(\d+)\]")


@pytest.fixture(scope="module")
def ask(engine):
    """engine.ask, memoised so that several tests can look at the same answer."""
    return lru_cache(maxsize=None)(lambda question, mode=None: engine.ask(question, mode=mode))


def assert_citations_consistent(engine, answer) -> None:
    """Every [n] has its source, every source is used, numbered 1..k, quotes are sentences of the paper (without
    a dangling lead-in: the rest of the sentence, exactly)."""
    used = {int(n) for n in CITE.findall(answer.answer)}
    numbers = [c.n for c in answer.citations]
    assert numbers == list(range(1, len(numbers) + 1)), f"citations numbered {numbers}"
    assert used == set(numbers), f"answer uses {sorted(used)} but lists sources {numbers}"
    assert len({c.doc_id for c in answer.citations}) == len(numbers), "one number per paper"
    for c in answer.citations:
        paper = engine.retriever.papers[c.doc_id]
        assert c.title == clean_markup(paper.title)
        assert c.source == paper.source
        assert quoted_from(engine, c) is not None, f"[{c.n}] quote is not a (cleaned) sentence of {c.doc_id}: {c.quote!r}"
        assert c.quote in clean_markup(paper.text).replace("[", "(").replace("]", ")")


def quoted_from(engine, citation) -> tuple[str, str] | None:
    """The (sentence, sentence before it) a citation's quote was made from (rag_bot/writing/quotes.py `quoted`), or None."""
    sentences = engine.sentences.of(engine.papers[citation.doc_id])[0]
    for i, sentence in enumerate(sentences):
        before = sentences[i - 1] if i else ""
        if quoted(sentence, before)[0] == citation.quote:
            return sentence, before
    return None


INTEGRITY_QUESTIONS = [
    "what does CorrSteer gain on HarmBench?",
    "Compare CorrSteer and SARSteer",
    "Summarize the work on federated fine-tuning",
    "How does CapKV differ from BinaryPC?",
    "What does the collection say about sparse autoencoders?",
    "How can a model decide which stored attention entries to discard when memory for long prompts runs out?",
    "Which papers evaluate language models more cheaply?",
    "how does quartet-ii train in 4-bit?",
]


def test_the_integrity_questions_are_answered(ask):
    # Each is about papers of the seeds; the fitted decision may decline a paraphrase it cannot place (one of these
    # eight today), never most of them.
    answered = [ask(q, None).grounded for q in INTEGRITY_QUESTIONS]
    assert sum(answered) >= len(INTEGRITY_QUESTIONS) - 1, answered


@pytest.mark.parametrize("mode", ["ask", "summary", "compare"])
@pytest.mark.parametrize("question", INTEGRITY_QUESTIONS)
def test_every_citation_is_used_numbered_and_quoted_verbatim(engine, ask, question, mode):
    answer = ask(question, mode)
    assert answer.mode == mode
    if not answer.grounded:  # declined (a fitted decision, measured in docs/eval.md): nothing may be cited
        assert answer.citations == [] and not CITE.search(answer.answer)
        return
    assert answer.citations, "a grounded answer cites at least one paper"
    assert_citations_consistent(engine, answer)
    if mode != "compare":  # compare cells show several sentences, cited with the approach sentence
        for c in answer.citations:
            # the quoted sentence is what the answer shows (long ones shortened for display; capitalised when its
            # lead-in was dropped)
            shown = quoted(*quoted_from(engine, c))[1]
            assert f"{shown} [{c.n}]" in answer.answer or shown[:150] in answer.answer


def test_summary_quotes_of_long_sentences_are_whole_sentences(engine):
    from rag_bot.types import ScoredPaper

    paper = engine.retriever.papers[paper_with(engine, "AC-ODM")]
    long = max(split_sentences(clean_markup(paper.text)), key=len)
    assert len(long) > 320  # the abstract has a sentence longer than the display limit
    hit = ScoredPaper(paper=paper, score=1.0, similarity=0.9, named=True)
    answer = engine.writer.compose(long, "summary", [hit])
    assert answer.citations[0].doc_id == paper.doc_id
    assert answer.citations[0].quote == long, "the quote is the whole sentence, even when shown shortened"
    assert long[:150] in answer.answer


GROUNDED = [
    ("what does CorrSteer gain on HarmBench?", "CorrSteer"),
    ("Stopping voice assistants from answering dangerous spoken requests without refusing harmless ones",
     "SARSteer"),
    ("When queuing requests to a language model server, how to account for not knowing how long each reply "
     "will be?", "Tail Inflated Expectation"),
    ("How well do language models plan routes to make drug molecules in the lab?", "CREED"),
    ("Reducing how many test questions are needed to rank language models by choosing the most informative ones",
     "ATLAS"),
    ("Speeding up attention on very long inputs by turning keys into compact bit codes with no training",
     "BinaryPC"),
    ("What does Quartet 2 do?", "Quartet II"),
    ("how does capkv work", "CapKV"),
]


@pytest.mark.parametrize(("question", "name"), GROUNDED, ids=[n for _, n in GROUNDED])
def test_grounded_question_cites_the_expected_paper_first(engine, ask, question, name):
    answer = ask(question, None)
    assert answer.grounded
    first = answer.citations[0]
    assert first.doc_id == paper_with(engine, name)
    # the lead of the answer is that paper's sentence, cited [1]
    shown = quoted(*quoted_from(engine, first))[1]  # the quote as shown (capitalised when a lead-in was dropped)
    assert answer.answer.index(shown) < answer.answer.index("[1]") + 200
    assert f"{shown} [1]" in answer.answer


# None of the 38 abstracts is about these (checked by reading them and grepping the seeds for the key words).
OUT_OF_COLLECTION = [
    "How do I make a sourdough bread starter?",
    "What caused the fall of the Western Roman Empire?",
    "diffusion model sampling in few steps",  # near miss: no abstract mentions diffusion
    "image super-resolution with generative adversarial networks",  # near miss: no SR or GANs
    "autonomous driving perception from lidar point clouds",  # near miss: no lidar/point clouds
    "detecting hallucinations in retrieval augmented generation",  # near miss: no RAG/hallucination paper
    "protein structure prediction from amino acid sequences",  # near miss: no proteins
    "neural machine translation between English and German",  # near miss: no translation
    "weather forecasting with deep learning",  # near miss: only BRIDGE "forecasts" model capabilities
]


MISSING_OPENINGS = words.MISSING_OPENINGS


@pytest.mark.parametrize("question", ["How do I make a sourdough bread starter?",
                                      "What caused the fall of the Western Roman Empire?"])
def test_a_question_far_from_every_abstract_is_declined_with_nearest_topics(engine, ask, question):
    answer = ask(question, None)
    assert answer.grounded is False, f"should decline, answered: {answer.answer[:200]!r}"
    assert answer.citations == [] and not CITE.search(answer.answer), "a refusal carries no citation"
    assert answer.answer.startswith(MISSING_OPENINGS)
    nearest = [engine.retriever.papers[r["doc_id"]] for r in answer.retrieved[:3]]
    assert nearest, "the retrieved list is still reported"
    for paper in nearest:
        assert clean_markup(paper.title) in answer.answer, "the refusal names the nearest topics"


NEAR_MISSES = OUT_OF_COLLECTION[2:] + ["differential privacy guarantees for training",  # no abstract mentions privacy
                                       "reinforcement learning for robot grasping in the real world"]  # nor robots


def test_near_misses_are_declined_shown_tentatively_or_told_what_is_missing(ask):
    # The decision is a fitted probability, measured on held-out questions in docs/eval.md; here, on questions
    # none of the 38 abstracts answers, nearly every answer must decline or lead with what is missing, and a
    # refusal never cites.
    told = []
    for question in NEAR_MISSES:
        answer = ask(question, None)
        # declined, or shown as the closest papers for the reader to judge: never claimed as answered
        told.append(answer.certainty != "confident" or answer.answer.startswith(MISSING_OPENINGS))
        lacks_part = answer.answer.startswith(words.LACKS_PART.split("{")[0])  # the closest on each part held follow
        if answer.certainty == "none" and not lacks_part:
            assert answer.citations == [] and not CITE.search(answer.answer)
    assert sum(told) >= len(NEAR_MISSES) - 1, told


@pytest.mark.parametrize(
    ("question", "topic"),
    [
        ("How well do satellites predict crop yields?", "satellites predict crop yields"),
        ("What does the collection say about coral reef bleaching?", "coral reef bleaching"),
    ],
)
def test_a_refusal_names_the_questions_topic_not_the_words_of_the_request(ask, question, topic):
    answer = ask(question, None)
    assert answer.grounded is False and answer.citations == []
    first = answer.answer.split("\n\n")[0]
    assert words.NOT_COVERED.format(what=f"\u201c{topic}\u201d") in first, first
    assert "collection say" not in first and "\u201cabout" not in first


@pytest.mark.parametrize("question", [
    "Is there a principled, theory-driven way to keep a sourdough starter alive while travelling so the bread still "
    "rises?",
    "When my tomato plants wilt in the afternoon heat, what watering schedule keeps the fruit from cracking?",
])
def test_a_refusal_of_a_long_question_does_not_quote_a_fragment_as_its_topic(ask, question):
    from rag_bot.topics import topic_phrase

    fragment = topic_phrase(question)  # "principled", "afternoon heat": a part of the question, not its subject
    answer = ask(question, None)
    first = answer.answer.split("\n\n")[0]
    assert answer.grounded is False and f"\u201c{fragment}\u201d" not in first, first
    assert first.startswith(words.NOT_COVERED.format(what=words.NOT_COVERED_THIS)), first


@pytest.mark.parametrize(
    ("question", "mode"),
    [
        ("Compare CorrSteer and SARSteer", "compare"),
        ("compare quartet-ii with CAT", "compare"),
        ("How does CapKV differ from BinaryPC?", "compare"),
        ("LED vs LVE for reasoning models", "compare"),
        ("Summarize the work on federated fine-tuning", "summary"),
        ("summarise the research on quantization", "summary"),
        ("Give me an overview of evaluation benchmarks", "summary"),
        ("Which papers study safety of audio language models?", "summary"),
        ("what does CorrSteer gain on HarmBench?", "ask"),
        ("How can a model decide which stored attention entries to discard?", "ask"),
        ("Is there a decoding trick for reasoning models?", "ask"),
    ],
)
def test_mode_is_detected_from_the_question(question, mode):
    assert detect_mode(question) == mode


def test_answer_reports_the_detected_mode(ask):
    assert ask("Compare CorrSteer and SARSteer", None).mode == "compare"
    assert ask("Summarize the work on federated fine-tuning", None).mode == "summary"
    assert ask("what does CorrSteer gain on HarmBench?", None).mode == "ask"


def test_mode_override_changes_the_answer_shape(ask):
    question = "Compare CorrSteer and SARSteer"
    compared, summarised = ask(question, None), ask(question, "summary")
    assert summarised.mode == "summary"
    assert "|---" in compared.answer
    assert "|---" not in summarised.answer, "a summary is a grouped list, not the comparison table"
    plain = ask(question, "ask")
    assert plain.mode == "ask" and "|---" not in plain.answer
    # a question about one paper forced into compare mode says there is nothing on topic to compare it with
    forced = ask("what does CorrSteer gain on HarmBench?", "compare")
    assert forced.mode == "compare" and forced.answer.startswith(words.COMPARE_ONLY_ONE)


def _table_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows]


@pytest.mark.parametrize(
    ("question", "first", "second"),
    [
        ("Compare CorrSteer and SARSteer", "CorrSteer", "SARSteer"),
        ("How does CapKV differ from BinaryPC?", "CapKV", "BinaryPC"),
        ("compare quartet-ii with CAT", "Quartet II", "CAT"),
    ],
)
def test_compare_answer_is_a_table_citing_both_papers_in_their_cells(engine, ask, question, first, second):
    answer = ask(question, None)
    assert answer.mode == "compare"
    rows = _table_rows(answer.answer)
    assert len(rows) >= 4, "header, separator and at least two rows"
    header, separator, body = rows[0], rows[1], rows[2:]
    assert all(set(c) <= set("-: ") for c in separator)
    numbers = {c.doc_id: c.n for c in answer.citations}
    for column, name in ((1, first), (2, second)):
        doc_id = paper_with(engine, name)
        assert doc_id in numbers, f"{name} must be cited"
        assert clean_markup(engine.retriever.papers[doc_id].title).split(":")[0] in header[column]
        cited_cells = [row[column] for row in body if f"[{numbers[doc_id]}]" in row[column]]
        assert len(cited_cells) >= 2, f"{name}'s column cells carry its citation [{numbers[doc_id]}]"
    assert all(len(row) == len(header) for row in body), "every row has a cell per paper"


def test_summary_cites_several_papers(engine, ask):
    answer = ask("Summarize the work on federated fine-tuning", None)
    cited = {c.doc_id for c in answer.citations}
    assert cited == {paper_with(engine, "Het-CPFLoRA"), paper_with(engine, "FedRot-LoRA")}, "both, and no filler"
    # every cited paper has its own bullet
    assert answer.answer.count("\n- **") >= len(cited) - 1

    quant = ask("Summarize the research on quantization", None)
    assert {paper_with(engine, "CAT"), paper_with(engine, "Quartet II")} <= {c.doc_id for c in quant.citations}


@pytest.mark.parametrize(
    ("question", "name", "keyword"),
    [
        ("what does CorrSteer gain on HarmBench?", "CorrSteer", "HarmBench"),
        ("By how much does BinaryPC improve decoding throughput?", "BinaryPC", "throughput"),
        ("How much does TIE reduce per-token latency?", "Tail Inflated Expectation", "per-token latency"),
        ("What speedup does ECHO reach?", "ECHO", "walltime speedup"),
        ("How much faster is XSpecMesh than plain decoding?", "XSpecMesh", "speedup"),
    ],
)
def test_fact_question_answer_carries_the_figure_from_the_abstract(engine, ask, question, name, keyword):
    answer = ask(question, None)
    paper = engine.retriever.papers[paper_with(engine, name)]
    # the abstract's sentence stating the figure, and its figures
    source = [s for s in split_sentences(clean_markup(paper.text)) if keyword in s]
    assert len(source) == 1
    figures = re.findall(r"\d+(?:\.\d+)?", source[0].split(keyword)[0][-60:] + source[0].split(keyword)[1][:40])
    assert figures
    assert any(f in answer.answer for f in figures)
    assert answer.citations[0].doc_id == paper.doc_id


def test_corrsteer_harmbench_gain_is_quoted(ask):
    answer = ask("what does CorrSteer gain on HarmBench?", None)
    assert "27.1" in answer.answer
    assert "27.1" in answer.citations[0].quote


def test_a_question_runs_retrieve_ground_write_each_stage_returning_what_it_decides(engine):
    from rag_bot.nodes import PaperQuery

    question = "What does Corr Steer select?"
    query = PaperQuery(query_str=question, question=question, mode="ask")
    nodes = engine.query_engine.retrieve(query)  # llama-index's query engine retrieves
    decision, ranked = engine.grounding.run(query, nodes)  # grounding returns its decision, writes nothing on the query
    assert not hasattr(query, "grounding")
    assert decision.certainty == "confident" and decision.grounded
    response = engine.writer.synthesize(query, ranked, grounding=decision)  # the engine hands it to the writer
    text = "".join(response.response_gen)
    answer = response.metadata["answer"]
    assert answer.certainty == "confident" and answer.grounded and answer.citations and "[1]" in text
    assert answer.citations[0].doc_id == paper_with(engine, "CorrSteer")
    assert_citations_consistent(engine, answer)
    # the writer cited only the decision's sources, each with the probability grounding gave it
    chosen = [p.paper.doc_id for p in decision.sources]
    assert {c.doc_id for c in answer.citations} <= set(chosen) <= {n.node.node_id for n in ranked}
    assert all(c.probability == decision.probability(c.doc_id) is not None for c in answer.citations)
    assert [r["doc_id"] for r in answer.retrieved] == [n.node.node_id for n in ranked][:10]
    # ranked as grounding weighed them, most probable first, scored by that probability (docs/eval.md, "Which paper
    # leads")
    assert len(decision.ranking) >= 2 and [(n.node.node_id, n.score) for n in ranked][:len(decision.ranking)] == [
        (doc_id, round(p, 6)) for doc_id, p in decision.ranking]
    # the same answer as the engine gives
    assert text.strip() == engine.ask(question).answer
    # without a decision nothing may be cited (llama-index's own query path grounds nothing)
    plain = engine.query_engine.query(PaperQuery(query_str=question, question=question, mode="ask"))
    "".join(plain.response_gen)
    assert plain.metadata["answer"].certainty == "none" and plain.metadata["answer"].citations == []


def test_no_retrieved_paper_is_a_refusal_not_a_crash(engine):
    from rag_bot.nodes import PaperQuery

    response = engine.writer.synthesize(PaperQuery(query_str="x", question="anything at all", mode="ask"), [])
    text = "".join(response.response_gen)
    answer = response.metadata["answer"]
    assert answer.grounded is False and answer.certainty == "none" and answer.citations == []
    assert text.startswith(words.NOT_COVERED.split("{what}")[0])


@pytest.mark.parametrize("question", [
    "centroids", "tell me about centroids", "explain absorbing states", "summarize the work on centroids",
    "where is the code of adapter?",
])
def test_questions_whose_papers_all_fall_below_min_score_get_an_answer_not_a_crash(ask, question):
    answer = ask(question, None)
    assert answer.answer.strip()
    assert answer.grounded == bool(answer.citations)


@pytest.mark.parametrize("question", [
    "Summarize the work on making LLM inference and serving cheaper.", "Summarize the work on evaluating language models.",
    "Which papers study activation steering?", "Summarize the work on federated learning",
])
def test_theme_headings_are_short_phrases_drawn_from_the_cited_papers(engine, ask, question):
    answer = ask(question, "summary")
    headings = re.findall(r"^\*\*([^*]+)\*\*$", answer.answer, flags=re.MULTILINE)
    # Headings are optional (none rather than a weak one, rag_bot/writing/themes.py); the opening says whether there are.
    assert ("grouped by theme" in answer.answer.split("\n")[0]) == bool(set(headings) - {"Also on this topic"})
    texts = " ".join(re.sub(r"[()]", "", clean_markup(engine.papers[c.doc_id].text).lower())
                     for c in answer.citations)
    for heading in headings:
        assert 1 <= len(heading.split()) <= 4, heading
        assert heading in ("Other related work", "Related work") or heading.lower() in texts, heading


def test_offline_citations_are_supported_by_the_abstracts_they_cite(engine, ask):
    for question, mode in [("What does CorrSteer gain on HarmBench?", None), ("Compare CorrSteer and SARSteer", None),
                           ("Summarize the work on federated learning", "summary")]:
        answer = ask(question, mode)
        assert answer.citations and all(c.support >= engine.settings.support_threshold for c in answer.citations)
        assert answer.notice is None


@pytest.mark.parametrize("question, names", [
    ("Which papers study activation steering?", {"CorrSteer", "SARSteer"}),
    ("How do the speculative decoding papers in the collection differ?", {"XSpecMesh", "ECHO"}),
    ("What has this collection got on federated fine-tuning with LoRA?", {"Het-CPFLoRA", "FedRot-LoRA"}),
    ("Summarize the research that uses Item Response Theory to evaluate AI models.", {"ATLAS", "BRIDGE"}),
])
def test_an_area_cites_only_papers_on_its_topic(engine, ask, question, names):
    # Which of the topic's papers make the cut is a fitted decision (its recall is measured in docs/eval.md);
    # a paper off the topic is never cited.
    # A tentative answer claims nothing of the closest papers it shows: they lead with the topic's own.
    answer = ask(question, None)
    cited = {c.doc_id for c in answer.citations}
    topic = {paper_with(engine, name) for name in names}
    if answer.certainty == "tentative":
        assert answer.citations[0].doc_id in topic, answer.answer
    else:
        assert answer.certainty == "confident" and cited and cited <= topic, answer.answer


def test_a_comparison_by_topic_with_one_paper_on_it_says_so(ask):
    answer = ask("How do the mesh generation papers differ?", None)
    assert answer.mode == "compare" and len(answer.citations) == 1
    assert answer.answer.startswith(words.COMPARE_ONLY_ONE)


@pytest.mark.parametrize("question, opening, cites", [
    ("Summarize the work on sparse autoencoders for vision transformers.",
     words.LACKS_COMBINATION.format(first="sparse autoencoders", rest="vision transformers"), True),
    ("What does the collection say about speculative decoding for speech recognition?",
     words.LACKS_PART.format(lacking="speech recognition", held="speculative decoding"), True),
    ("Which papers use large language models for protein design?",
     words.LACKS_ALL.format(lacking="protein design"), False),
])
def test_what_the_collection_lacks_of_a_question_is_said_first_when_nothing_is_close(ask, question, opening, cites):
    # Never answered as covered; said lacking only when nothing is close (certainty none), the closest paper on each
    # part it holds still cited; when the closest papers may answer it (tentative), they are shown as such instead.
    answer = ask(question, None)
    assert answer.certainty != "confident"
    if answer.certainty == "none":
        assert not answer.grounded and answer.answer.startswith(opening) and bool(answer.citations) is cites
    else:
        assert answer.answer.startswith(words.TENTATIVE_LEAD.split("*")[0]) and not states_missing(answer.answer)
        assert words.TENTATIVE_CHECK in answer.answer


def test_answerable_dev_questions_are_rarely_told_that_something_is_missing(engine):
    from rag_bot.evaluation.evaluate import DEFAULT_SET, load_questions

    told = []
    for q in load_questions(DEFAULT_SET):
        if q.kind != "unanswerable":
            grounding = engine.ground(q.question, q.mode if q.kind in ("summary", "compare") else None)
            told += [q.id] if grounding.missing else []
    assert len(told) <= 2, told  # a fitted decision: 79 answerable questions, false refusals measured in docs/eval.md


def test_a_bold_heading_is_not_a_claim_of_the_paper_it_names():
    from rag_bot.writing.citations import claims_by_marker

    text = ("**OServe: LLM serving system with heterogeneous and flexible model deployment** [1]: OServe improves "
            "performance by up to 2x. [1]\n\n**Theme**\n- **TIE: Tail Inflated Expectation**: We argue that a point "
            "estimate does not match decoding. [2]\n| **Problem** | Activations are hard to steer. [1] |")
    assert claims_by_marker(text) == {
        1: ["OServe improves performance by up to 2x.", "Activations are hard to steer."],
        2: ["We argue that a point estimate does not match decoding."],
    }
    # A bold claim that is not a heading (no colon after its marker) stays a claim.
    assert claims_by_marker("**CorrSteer gains 27 points on HarmBench** [1].") == {
        1: ["CorrSteer gains 27 points on HarmBench"]}


@pytest.mark.parametrize("question, mode", [
    ("what does CorrSteer gain on HarmBench?", None), ("how much faster is OServe?", None),
    ("Compare CorrSteer and SARSteer", None), ("Summarize the work on benchmarks for agents", "summary"),
    ("Summarize the work on federated LoRA fine-tuning", "summary"),
])
def test_offline_claims_are_checked_against_the_abstract_sentences_they_quote(engine, ask, question, mode):
    """The offline writer's claims are sentences of the abstracts it cites: their support is checked with the
    vectors those sentences already have, so checking an answer embeds nothing."""
    from rag_bot.writing.citations import support_scores

    def no_embedding(texts):
        raise AssertionError(f"embedded again: {texts}")

    answer = ask(question, mode)
    assert answer.certainty == "confident", "a tentative answer only quotes: it is not checked"
    scores = support_scores(answer, engine.papers, engine.sentences.of, no_embedding)
    assert scores == {c.n: c.support for c in answer.citations}
    assert all(score >= 0.95 for score in scores.values()), scores


def test_a_summary_line_says_what_the_paper_does_or_finds(engine, ask):
    # The readers' roles of the seeds' sentences (bench/data/sentence_roles.jsonl): a summary's line for a paper is
    # one of its method or result sentences, not its background (0.9 of 30 lines here; 0.5 before the roles).
    import hashlib
    import json

    labels = {}
    for line in (ROOT / "bench" / "data" / "sentence_roles.jsonl").open():
        row = json.loads(line)
        labels[(row["doc_id"], row["sha1"])] = row["role"]
    roles = []
    for question in ("Summarize the work on making LLM inference and serving cheaper.",
                     "Give me an overview of the work on efficient attention and KV caches.",
                     "Summarize the work on federated learning", "Summarize the work on steering.",
                     "Summarize the work on evaluating language models.", "Summarize the work on speculative decoding",
                     "Summarize the work on reinforcement learning for reasoning",
                     "Summarize the work on benchmarks for agents", "Summarize the work on KV cache compression"):
        answer = ask(question, "summary")
        if answer.certainty != "confident":
            continue  # a tentative one shows each paper by its sentence closest to the question, for the reader
        for c in answer.citations:
            if c.related:
                continue  # listed by title and probability, not summarised
            whole = quoted_from(engine, c)[0]
            role = labels.get((c.doc_id, hashlib.sha1(whole.encode()).hexdigest()[:12]))
            roles += [role] if role else []
    assert len(roles) >= 8 and sum(r in ("method", "result") for r in roles) / len(roles) >= 0.8, roles


def test_what_the_collection_lacks_is_said_in_the_questions_own_phrases():
    from rag_bot.types import Missing
    from rag_bot.writing.compose import missing_sentence

    assert missing_sentence(Missing(lacking=("protein design",))) == words.LACKS_ALL.format(lacking="protein design")
    assert missing_sentence(Missing(lacking=("speech recognition",), held=("speculative decoding",))) == (
        words.LACKS_PART.format(lacking="speech recognition", held="speculative decoding"))
    assert missing_sentence(Missing(held=("sparse autoencoders", "vision transformers"))) == (
        words.LACKS_COMBINATION.format(first="sparse autoencoders", rest="vision transformers"))
    assert "protein design" in missing_sentence(Missing(lacking=("protein design",)))
