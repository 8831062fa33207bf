"""The question as every surface reads it: one cleaning rule, one length limit and one message for a question over
it (chat, engine, CLI, HTTP API, MCP), and the mode and follow-up a real question asks for."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from rag_bot.errors import QuestionTooLongError
from rag_bot.question import MAX_QUESTION_CHARS, checked_question, is_follow_up
from tests.conftest import run_main, serving

gr = pytest.importorskip("gradio")

# A reader pastes the same request many times over (or a long log): 4,487 characters once cleaned.
TOO_LONG = "What do the papers say about steering language models with sparse autoencoder features?\n" * 51
MESSAGE = (f"the question is too long ({len(' '.join(TOO_LONG.split())):,} characters; the limit is "
           f"{MAX_QUESTION_CHARS:,}): shorten it, or ask about one part at a time")


def _chat_says(question: str) -> str:
    """What the chat shows for a question it refuses (its check raises `gr.Error`)."""
    from rag_bot.surfaces.ui.chat import check_question

    with pytest.raises(gr.Error) as refused:
        check_question(question)
    return str(refused.value.message)


def test_an_over_long_question_gets_the_same_message_in_the_chat_and_the_engine(engine):
    with pytest.raises(QuestionTooLongError) as engine_refused:
        engine.ask(TOO_LONG)
    assert str(engine_refused.value) == MESSAGE
    assert _chat_says(TOO_LONG) == MESSAGE
    assert "4,000" in MESSAGE


def test_the_cli_refuses_an_over_long_question_with_the_same_line_before_loading_anything(monkeypatch, capsys,
                                                                                            tmp_path):
    code, out, err = run_main(monkeypatch, capsys, tmp_path / "store", "ask", TOO_LONG)
    assert (code, out, err.strip()) == (2, "", f"rag-bot: {MESSAGE}")


def test_the_http_api_and_mcp_refuse_an_over_long_question_with_the_same_message(engine):
    from mcp import Client

    from rag_bot.surfaces.api import create_api
    from rag_bot.surfaces.mcp_server import build_mcp

    with serving(create_api(engine)) as url:
        reply = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                           json={"model": "rag-bot", "messages": [{"role": "user", "content": TOO_LONG}]})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert (error["code"], error["param"], error["message"]) == ("question_too_long", "messages", MESSAGE)

    async def calls() -> list[str]:
        async with Client(build_mcp(engine)) as client:
            results = [await client.call_tool(tool, {"question": TOO_LONG}) for tool in ("ask", "search_papers")]
        assert all(r.is_error for r in results)
        return [r.content[0].text for r in results]

    # MCP's server names the tool before the message: "Error executing tool ask: the question is too long ...".
    assert [text.endswith(f": {MESSAGE}") for text in asyncio.run(calls())] == [True, True]


def test_a_pasted_abstract_with_line_breaks_is_accepted_by_the_chat_as_by_the_engine(engine):
    from rag_bot.surfaces.ui.chat import check_question

    # 3,000 characters: the chat refused it (its limit was 2,000) while the engine took it.
    abstract = ("Sparse autoencoders find interpretable features in language models;\n\n we steer outputs with them. "
                * 30)[:3000]
    assert check_question(abstract) == engine.query(abstract).question == " ".join(abstract.split())
    at_limit = "x" * MAX_QUESTION_CHARS
    assert check_question(at_limit) == checked_question(at_limit) == at_limit


@pytest.mark.parametrize("pasted", [
    "steering \x1b[31mLLMs\x1b[0m with sparse\u200b autoencoders",  # a coloured terminal paste, a zero-width space
    "steering LLMs\x00with\tsparse\r\nautoencoders\u202e",  # NUL, tab, CRLF, a bidi override
    "steering LLMs with sparse autoencoders\ud800",  # a lone surrogate (a valid JSON "\ud800")
])
def test_control_and_invisible_characters_are_cleaned_the_same_in_the_chat_and_the_engine(engine, pasted):
    from rag_bot.surfaces.ui.chat import check_question

    chat = check_question(pasted)
    assert chat == engine.query(pasted).question
    assert "\x1b" not in chat and "[31m" not in chat and "\u200b" not in chat and "\u202e" not in chat
    assert chat.startswith("steering LLMs with") and "  " not in chat


def test_a_question_of_only_invisible_characters_is_empty_in_the_chat_too():
    assert _chat_says("\u200b\ufeff \x1b[0m") == "Please type a question."


@pytest.mark.parametrize(("question", "mode", "searched"), [
    ("and which of them is fastest?", "ask",
     "Summarize the work on KV cache compression and which of them is fastest?"),
    ("How does LoRA differ from full fine-tuning?", "compare", "How does LoRA differ from full fine-tuning?"),
])
def test_a_follow_up_searches_with_the_previous_question_in_the_mode_it_asks_for(engine, question, mode, searched):
    from rag_bot.types import Turn

    # The mode follows what the user typed now (test_compose checks it on many more questions), not the last turn.
    query = engine.query(question, history=[Turn(question="Summarize the work on KV cache compression")])
    assert (query.mode, query.query_str, query.question) == (mode, searched, question)


@pytest.mark.parametrize(("question", "follows"), [
    ("and which of them is fastest?", True),
    ("What about their memory use?", True),
    ("do any use reinforcement learning?", True),
    ("Which paper introduces CorrSteer?", False),
    ("Summarize the work on KV cache compression", False),
])
def test_a_follow_up_is_told_from_a_standalone_question(question, follows):
    assert is_follow_up(question) is follows
