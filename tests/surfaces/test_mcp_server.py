"""`rag-bot mcp` over stdio, driven by the `mcp` package's own client on the seed store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.conftest import serving

pytestmark = pytest.mark.slow


def _structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
    if data is None:  # the text content is the same object as JSON
        data = json.loads(result.content[0].text)
    return dict(data)


async def _session_calls(storage: Path) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "rag_bot.surfaces.cli", "mcp"],
        env={**os.environ, "RAG_BOT_STORAGE": str(storage), "RAG_BOT_LLM": "offline"},
    )
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        out["search"] = _structured(await session.call_tool("search_papers", {
            "question": "steering LLMs with correlated sparse autoencoder features", "top_k": 5}))
        out["search_filtered"] = _structured(await session.call_tool("search_papers", {
            "question": "steering LLMs with correlated sparse autoencoder features", "year": "1900"}))
        out["search_year_number"] = _structured(await session.call_tool("search_papers", {
            "question": "steering LLMs with correlated sparse autoencoder features", "year": 2026, "top_k": 3}))
        out["year_true"] = await session.call_tool("search_papers", {"question": "steering", "year": True})
        out["search_icml"] = _structured(await session.call_tool("search_papers", {
            "question": "steering LLMs with correlated sparse autoencoder features", "venue": "icml",
            "year": "2025-2026", "top_k": 3}))
        out["ask"] = _structured(await session.call_tool("ask", {
            "question": "which paper steers LLMs using correlated sparse autoencoder features?"}))
        out["summary"] = _structured(await session.call_tool("ask", {
            "question": "which paper steers LLMs using correlated sparse autoencoder features?", "mode": "summary"}))
        doc_id = out["search"]["papers"][0]["doc_id"]
        out["paper"] = _structured(await session.call_tool("get_paper", {"doc_id": doc_id}))
        out["unknown"] = await session.call_tool("get_paper", {"doc_id": "no-such-paper#1"})
        out["empty"] = await session.call_tool("ask", {"question": "   "})
        out["templates"] = (await session.list_resource_templates()).resource_templates
        out["resource"] = await session.read_resource(f"paper://{quote(doc_id, safe='')}")  # '#' is %23
        out["prompts"] = {p.name: p for p in (await session.list_prompts()).prompts}
        out["prompt"] = await session.get_prompt("summarize_area", {"topic": "activation steering"})
    return out


def test_mcp_tools_over_stdio(seed_storage: Path):
    calls = asyncio.run(asyncio.wait_for(_session_calls(seed_storage), timeout=240))

    assert set(calls["tools"]) == {"search_papers", "ask", "get_paper"}
    # Each paper is a resource, and two prompts are offered.
    assert [t.uri_template for t in calls["templates"]] == ["paper://{doc_id}"]
    text = calls["resource"].contents[0].text
    assert text.startswith("# CorrSteer") and "Sparse Autoencoders" in text and calls["search"]["papers"][0]["doc_id"] in text
    assert set(calls["prompts"]) == {"summarize_area", "compare_papers"}
    said = calls["prompt"].messages[0].content.text
    assert "activation steering" in said and "mode 'summary'" in said
    assert "inside the search" in calls["tools"]["search_papers"].description

    papers = calls["search"]["papers"]
    assert 1 <= len(papers) <= 5
    assert papers[0]["title"] == "CorrSteer" and papers[0]["rank"] == 1
    assert all({"doc_id", "title", "score", "venue", "year"} <= set(p) for p in papers)
    assert [p["score"] for p in papers] == sorted((p["score"] for p in papers), reverse=True)
    assert calls["search_filtered"]["papers"] == []  # no seed paper is from 1900
    assert [p["doc_id"] for p in calls["search_icml"]["papers"]] == [p["doc_id"] for p in papers[:3]]
    assert {p["venue"] for p in calls["search_icml"]["papers"]} == {"ICML"}
    # a year given as a number, as agents send it, filters as the string does
    # JSON true (read as the number 1) is no year: said so, not an empty list
    assert calls["year_true"].is_error and "year must be YYYY" in calls["year_true"].content[0].text
    assert [p["doc_id"] for p in calls["search_year_number"]["papers"]] == [p["doc_id"] for p in papers[:3]]

    ask = calls["ask"]
    assert ask["grounded"] and ask["mode"] == "ask" and ask["certainty"] == "confident"
    assert all(0 < c["probability"] <= 1 for c in ask["citations"]), "each source's probability"
    assert "[1]" in ask["answer"] and "References:" in ask["answer"]
    assert ask["citations"][0]["doc_id"] == papers[0]["doc_id"] and ask["citations"][0]["quote"]
    assert f"[1] CorrSteer ({papers[0]['doc_id']})" in ask["answer"]
    assert calls["summary"]["mode"] == "summary"

    paper = calls["paper"]
    assert paper["doc_id"] == papers[0]["doc_id"] and paper["title"] == "CorrSteer"
    assert "CorrSteer" in paper["abstract"] and paper["source"].endswith(".txt")

    for result, words in ((calls["unknown"], "unknown doc_id"), (calls["empty"], "empty")):
        assert result.is_error
        assert words in result.content[0].text


async def _http_calls(url: str) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        tools = {t.name for t in (await session.list_tools()).tools}
        search = _structured(await session.call_tool("search_papers", {"question": "CorrSteer", "top_k": 1}))
    return {"tools": tools, "search": search}


def test_api_and_mcp_mount_beside_the_chat(engine):
    """The mount lines for the chat: /v1 and /mcp on the FastAPI app that Gradio is mounted on, one port."""

    import gradio as gr
    import httpx
    import openai
    from fastapi import FastAPI

    from rag_bot.surfaces.api import mount_api
    from rag_bot.surfaces.mcp_server import mount_mcp

    with gr.Blocks() as blocks:
        gr.Markdown("chat")
    app = FastAPI()
    mount_api(app, engine)
    mount_mcp(app, engine)
    mount_mcp(app, engine, path="/mcp-keyed", api_key="k")
    app = gr.mount_gradio_app(app, blocks, path="/")

    with serving(app) as base:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()][0] == "rag-bot"
        calls = asyncio.run(asyncio.wait_for(_http_calls(f"{base}/mcp"), timeout=60))
        assert calls["tools"] == {"search_papers", "ask", "get_paper"}
        assert calls["search"]["papers"][0]["title"] == "CorrSteer"
        denied = httpx.post(f"{base}/mcp-keyed", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert denied.status_code == 401
        page = httpx.get(f"{base}/")
        assert page.status_code == 200 and "gradio" in page.text.lower()


async def _hostile_calls(url: str) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    from tests.surfaces.test_api import HOSTILE_QUESTION

    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return {
            "search": _structured(await session.call_tool("search_papers", {"question": HOSTILE_QUESTION})),
            "ask": _structured(await session.call_tool("ask", {"question": HOSTILE_QUESTION})),
            "paper": _structured(await session.call_tool("get_paper", {"doc_id": "glow-1"})),
        }


def test_mcp_returns_a_hostile_abstract_neutralised(tmp_path):
    """A store whose abstract holds an image, a raw <img onerror> and a javascript: link, asked over streamable
    HTTP: no tool returns them active, and the words and citation still come back."""

    from fastapi import FastAPI

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.surfaces.mcp_server import mount_mcp
    from tests.surfaces.test_api import active, hostile_storage

    engine = Engine(Settings(storage=hostile_storage(tmp_path)))
    with serving(mount_mcp(FastAPI(), engine)) as base:
        calls = asyncio.run(asyncio.wait_for(_hostile_calls(f"{base}/mcp"), timeout=120))

    hits = {p["doc_id"]: p for p in calls["search"]["papers"]}
    assert hits["glow-1"]["rank"] == 1 and "Glowworm" in hits["glow-1"]["title"]
    assert hits["glow-1"]["url"] is None and hits["moth-2"]["url"] == "https://e.org/moth"  # javascript: dropped
    ask, paper = calls["ask"], calls["paper"]
    assert ask["grounded"] and ask["citations"][0]["doc_id"] == "glow-1" and "(glow-1)" in ask["answer"]
    assert "91.2% lantern accuracy" in ask["answer"] and "91.2% lantern accuracy" in paper["abstract"]
    assert paper["url"] is None and paper["links"] and all(link.startswith("http") for link in paper["links"])
    texts = [hits["glow-1"]["title"], ask["answer"], ask["citations"][0]["title"], ask["citations"][0]["quote"],
             paper["title"], paper["abstract"]]
    for text in texts:
        assert active(text) == [], text
