"""The relevance step before an LLM writes (rag_bot/grounding/judge.py), against the stub of the OpenAI API
(tests/openai_stub.py): one bounded call per question decides which papers become the sources; when it fails or its reply is malformed,
the grounding stage's decision stands."""

from __future__ import annotations

import logging
import re

import pytest

from rag_bot.engine import Engine
from rag_bot.grounding.judge import (
    JUDGE_ABSTRACT_CHARS,
    JUDGE_CANDIDATES,
    JUDGE_MAX_TOKENS,
    RelevanceJudge,
    parse_relevant,
)
from rag_bot.nodes import scored_paper
from rag_bot.prompts import format_sources
from tests.openai_stub import Reply, StubOpenAI, source_titles, user_prompt

AREA = "Summarize the work on federated fine-tuning with LoRA"  # grounding: Het-CPFLoRA, FedRot-LoRA
NAMED = "How does CorrSteer compare to other activation steering methods?"  # CorrSteer named, two unnamed
ANSWER = "The first source answers it [1]."


@pytest.fixture
def llm_engine(llm_engine):
    """The shared stub-backed engines, without retries: a failing judge call falls back at once."""
    return lambda **overrides: llm_engine(**{"llm_retries": 0, **overrides})


def is_judge(body: dict) -> bool:
    """Whether a request is the relevance judge's (its prompt asks for the JSON verdict)."""
    return 'Reply with one line of JSON and nothing else: {"relevant":' in user_prompt(body)


def script(stub: StubOpenAI, judge: Reply | str) -> None:
    """The judge's request gets `judge`; every answer request gets ANSWER."""
    verdict = judge if isinstance(judge, Reply) else Reply(text=judge)
    stub.default = lambda body: verdict if is_judge(body) else Reply(text=ANSWER)


def split(stub: StubOpenAI) -> tuple[list[dict], list[dict]]:
    """The judge's requests and the answer requests."""
    judged = [b for b in stub.requests if is_judge(b)]
    return judged, [b for b in stub.requests if not is_judge(b)]


def offline_sources(e: Engine, question: str) -> str:
    """The source blocks of the grounding stage's own decision, as an answer request shows them."""
    return format_sources([p.paper for p in e.ground(question).sources])


# --- the reply format ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "expected"), [
    ('{"relevant": [1, 3]}', [1, 3]),
    ('```json\n{"relevant": [3, "2", 3]}\n```', [3, 2]),
    ('Here is my verdict: {"relevant": []}', []),
    ("RELEVANT: 2, 4", [2, 4]),
    ("relevant: none", []),
    ("The papers 1 and 3 are relevant.", None),
    ('{"relevant": [1, 9]}', None),
    ('{"relevant": [0]}', None),
    ('{"relevant": [1,', None),
    ('{"relevant": [true]}', None),
    ('{"papers": [1]}', None),
    ("", None),
])
def test_the_reply_is_parsed_strictly(reply, expected):
    assert parse_relevant(reply, 4) == expected


# --- through the engine ----------------------------------------------------------------------------------------
def test_the_judge_runs_only_for_an_llm_writer(engine, llm_engine):
    assert engine.judge is None
    assert isinstance(llm_engine().judge, RelevanceJudge)


def test_the_model_drops_an_off_topic_source_in_one_bounded_call(llm_engine, stub):
    e = llm_engine()
    marked = source_titles({"messages": [{"role": "user", "content": offline_sources(e, AREA)}]})
    assert len(marked) >= 2
    script(stub, '{"relevant": [1]}')
    answer = e.ask(AREA)
    (judged,), (asked,) = split(stub)
    assert judged["max_tokens"] == JUDGE_MAX_TOKENS and not judged.get("stream")
    prompt = user_prompt(judged)
    blocks = re.findall(r'<source id="\d+">\nTitle: .*\nAbstract: (.*)\n</source>', prompt)
    assert len(marked) < len(blocks) <= JUDGE_CANDIDATES, "the sources and the next ranked papers, bounded"
    assert source_titles(judged)[:len(marked)] == marked, "the grounding stage's sources come first"
    assert all(len(abstract) <= JUDGE_ABSTRACT_CHARS + 2 for abstract in blocks)
    assert f"Question: {AREA}" in prompt
    assert source_titles(asked) == marked[:1], "the answer is written from the judged sources only"
    assert answer.grounded and [c.title for c in answer.citations] == marked[:1]
    # the decision alone, judged as the answer was: the judged source only, typed, without writing
    judged_decision = e.ground(AREA, judged=True)
    assert judged_decision.grounded and [p.paper.title for p in judged_decision.sources] == marked[:1]


def test_the_model_may_add_a_close_paper_after_the_sources(llm_engine, stub, engine):
    e = llm_engine()
    script(stub, '{"relevant": [1, 2, 3]}')
    e.ask(AREA)
    (judged,), (asked,) = split(stub)
    assert source_titles(asked) == source_titles(judged)[:3]
    ranked = {p.paper.title: p for p in map(scored_paper, engine.retriever.retrieve(e.query(AREA)))}
    assert all(ranked[t].similarity >= e.settings.min_score for t in source_titles(judged)), \
        "no paper below min_score is offered"


def test_none_relevant_declines_without_an_answer_request(llm_engine, stub):
    e = llm_engine()
    script(stub, '{"relevant": []}')
    answer = e.ask(AREA)
    judged, asked = split(stub)
    assert len(judged) == 1 and asked == []
    assert not answer.grounded and answer.citations == []


@pytest.mark.parametrize("reply", ["Papers 1 and 2 are about steering.", '{"relevant": [1, 42]}',
                                   '{"relevant": [1, 2', ""])
def test_malformed_output_keeps_the_offline_decision(llm_engine, stub, reply, caplog):
    e = llm_engine()
    script(stub, reply)
    with caplog.at_level(logging.WARNING, logger="rag_bot.grounding.judge"):
        answer = e.ask(AREA)
    judged, (asked,) = split(stub)
    assert len(judged) == 1
    assert offline_sources(e, AREA) in user_prompt(asked)
    assert answer.grounded and answer.llm == "gpt-4o-mini"
    (record,) = caplog.records
    assert "malformed" in record.getMessage() and "\n" not in record.getMessage()


def test_a_failing_judge_call_keeps_the_offline_decision(llm_engine, stub, caplog):
    e = llm_engine()
    script(stub, Reply(status=500))
    with caplog.at_level(logging.WARNING, logger="rag_bot.grounding.judge"):
        answer = e.ask(AREA)
    judged, (asked,) = split(stub)
    assert len(judged) == 1, "llm_retries=0: one attempt"
    assert offline_sources(e, AREA) in user_prompt(asked)
    assert answer.grounded and answer.llm == "gpt-4o-mini" and "offline composer" not in (answer.notice or "")
    assert any("server error (500)" in r.getMessage() for r in caplog.records)


def test_a_named_paper_is_never_dropped_and_each_question_is_judged_once(llm_engine, stub):
    e = llm_engine()
    script(stub, '{"relevant": []}')
    for streaming in (False, True):
        stub.requests.clear()
        answer = list(e.stream(NAMED))[-1] if streaming else e.ask(NAMED)
        judged, (asked,) = split(stub)
        # Judged once when grounding set unnamed papers beside it; not at all when it chose the named one alone.
        assert len(judged) <= 1
        assert source_titles(asked) == ["CorrSteer"], "the named paper stays; any others were judged off topic"
        assert answer.grounded and answer.mode == "compare"
