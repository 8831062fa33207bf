"""`rag-bot mcp` over stdio, driven by the `mcp` package's own client on the seed store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

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
        command=sys.executable, args=["-m", "rag_bot.mcp_server"],
        env={**os.environ, "RAG_BOT_STORAGE": str(storage), "RAG_BOT_LLM": "offline"},
    )
    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        out["tools"] = {t.name: t for t in (await session.list_tools()).tools}
        out["search"] = _structured(await session.call_tool("search_papers", {
            "question": "steering LLMs with correlated sparse autoencoder features", "top_k": 5}))
        out["search_filtered"] = _structured(await session.call_tool("search_papers", {
            "question": "steering LLMs with correlated sparse autoencoder features", "year": 1900}))
        out["ask"] = _structured(await session.call_tool("ask", {
            "question": "which paper steers LLMs using correlated sparse autoencoder features?"}))
        out["summary"] = _structured(await session.call_tool("ask", {
            "question": "which paper steers LLMs using correlated sparse autoencoder features?", "mode": "summary"}))
        doc_id = out["search"]["papers"][0]["doc_id"]
        out["paper"] = _structured(await session.call_tool("get_paper", {"doc_id": doc_id}))
        out["unknown"] = await session.call_tool("get_paper", {"doc_id": "no-such-paper#1"})
        out["empty"] = await session.call_tool("ask", {"question": "   "})
    return out


def test_mcp_tools_over_stdio(seed_storage: Path):
    calls = asyncio.run(asyncio.wait_for(_session_calls(seed_storage), timeout=240))

    assert set(calls["tools"]) == {"search_papers", "ask", "get_paper"}
    assert "post-filter" in calls["tools"]["search_papers"].description or "after ranking" in \
        calls["tools"]["search_papers"].description

    papers = calls["search"]["papers"]
    assert 1 <= len(papers) <= 5
    assert papers[0]["title"] == "CorrSteer" and papers[0]["rank"] == 1
    assert all({"doc_id", "title", "score", "venue", "year"} <= set(p) for p in papers)
    assert [p["score"] for p in papers] == sorted((p["score"] for p in papers), reverse=True)
    assert calls["search_filtered"]["papers"] == []  # no seed paper is from 1900

    ask = calls["ask"]
    assert ask["grounded"] and ask["mode"] == "ask"
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
