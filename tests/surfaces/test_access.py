"""The door of /v1 and /mcp (rag_bot/surfaces/access.py): pure checks, then the chat's real server (`chat_server` under
the uvicorn server `serve` runs) with logins and a key, driven by httpx, the `openai` package and MCP's client."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_bot.surfaces.access import Door, Sessions, allowed_hosts, host_name, is_loopback, open_routes
from tests.conftest import free_port, serving

RAG_BOT = str(Path(sys.executable).parent / "rag-bot")
QUESTION = "What does CorrSteer do?"


# --- pure ---------------------------------------------------------------------------------------------------
def test_a_bind_beyond_loopback_with_an_open_route_is_refused() -> None:
    for host in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.1.1"):
        assert open_routes(host, logins=False, api_key=None) is None, host
    problem = open_routes("0.0.0.0", logins=False, api_key=None)
    assert problem and "RAG_BOT_AUTH" in problem and "anyone" in problem
    # a key guards /v1 and /mcp, not the chat: still refused; logins guard every route
    assert open_routes("192.168.1.5", logins=False, api_key="k")
    assert open_routes("my-host.lan", logins=True, api_key=None) is None
    # `rag-bot api` serves /v1 alone: the key is what guards it
    assert open_routes("0.0.0.0", logins=False, api_key=None, chat=False)
    assert open_routes("0.0.0.0", logins=False, api_key="k", chat=False) is None


def test_hosts_a_server_answers_to() -> None:
    assert host_name("[::1]:7860") == "::1" and host_name("LocalHost:80") == "localhost"
    assert is_loopback("127.0.0.1:7860") and not is_loopback("10.0.0.2")
    assert allowed_hosts("0.0.0.0") is None
    hosts = allowed_hosts("10.0.0.2")
    assert hosts is not None and "10.0.0.2" in hosts and "localhost" in hosts and "evil.example" not in hosts


def test_the_door_checks_host_origin_type_and_credentials() -> None:
    door = Door(api_key="k3y")
    ok = {"host": "127.0.0.1:7860", "content-type": "application/json", "authorization": "Bearer k3y"}
    assert door.refusal("POST", ok, {}) is None
    assert door.refusal("POST", {**ok, "host": "evil.example:7860"}, {})[0] == 421  # DNS rebinding
    assert door.refusal("POST", {**ok, "origin": "https://evil.example"}, {})[0] == 403
    assert door.refusal("POST", {**ok, "origin": "null"}, {})[0] == 403
    assert door.refusal("POST", {**ok, "origin": "http://127.0.0.1:7860"}, {}) is None
    assert door.refusal("POST", {**ok, "content-type": "text/plain"}, {})[0] == 415  # a cross-site form post
    assert door.refusal("POST", {**ok, "content-type": "application/json; charset=utf-8"}, {}) is None
    assert door.refusal("POST", {**ok, "content-type": "application/jsonx"}, {})[0] == 415
    assert door.refusal("POST", {**ok, "authorization": "Bearer nope"}, {})[0] == 401
    assert door.refusal("GET", {"host": "localhost"}, {})[0] == 401
    assert Door().refusal("GET", {"host": "localhost"}, {}) is None, "no key, no logins: open (loopback only)"


# --- the chat's server --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chat(engine) -> Iterator[str]:
    """`serve`'s ASGI app with logins (ann, bob) and the key "k3y", on the uvicorn server `serve` runs."""
    from rag_bot.surfaces.access import http_server
    from rag_bot.surfaces.ui.app import build_app, chat_server

    settings = engine.settings.model_copy(update={"api_key": "k3y", "host": "127.0.0.1"})
    keyed = type(engine)(settings, index=engine.index, retriever=engine.retriever, sentences=engine.sentences)
    with serving(chat_server(build_app(keyed), keyed, [("ann", "s3cret"), ("bob", "b0b")]), http_server) as base:
        yield base


def _login(base: str, user: str, password: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{base}/login", data={"username": user, "password": password}, headers=headers, timeout=10)


def _completion(base: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/chat/completions", headers=headers, timeout=120,
                      json={"model": "rag-bot", "messages": [{"role": "user", "content": QUESTION}]})


async def _get_paper(url: str, headers: dict[str, str]) -> Any:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        hits = await session.call_tool("search_papers", {"question": "CorrSteer", "top_k": 1})
        doc_id = json.loads(hits.content[0].text)["papers"][0]["doc_id"]
        return await session.call_tool("get_paper", {"doc_id": doc_id})


@pytest.mark.slow
def test_with_logins_the_api_and_mcp_need_a_login_or_the_key(chat) -> None:
    import openai

    # no credential: nothing of the collection comes back, on either route
    assert httpx.get(f"{chat}/v1/models").status_code == 401
    assert httpx.get(f"{chat}/openapi.json").status_code in (401, 404) and httpx.get(f"{chat}/docs").status_code in (
        401, 404), "no route list of the server without a login"
    refused = _completion(chat)
    assert refused.status_code == 401 and "CorrSteer" not in refused.text
    assert refused.json()["error"]["code"] == "invalid_api_key"
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_paper",
                                                                         "arguments": {"doc_id": "x"}}}
    mcp = httpx.post(f"{chat}/mcp", json=rpc, headers={"Accept": "application/json, text/event-stream"})
    assert mcp.status_code == 401
    assert _completion(chat, authorization="Bearer wrong").status_code == 401

    # the chat's login session opens /v1 and /mcp ...
    login = _login(chat, "ann", "s3cret")
    assert login.status_code == 200
    cookie = "; ".join(f"{name}={value}" for name, value in login.cookies.items())
    answer = _completion(chat, cookie=cookie)
    assert answer.status_code == 200 and answer.json()["rag_bot"]["citations"][0]["title"] == "CorrSteer"
    paper = asyncio.run(asyncio.wait_for(_get_paper(f"{chat}/mcp", {"cookie": cookie}), timeout=90))
    assert not paper.is_error and "CorrSteer" in paper.content[0].text
    # ... and so does the key, through the openai package
    client = openai.OpenAI(base_url=f"{chat}/v1", api_key="k3y", max_retries=0)
    reply = client.chat.completions.create(model="rag-bot", messages=[{"role": "user", "content": QUESTION}])
    assert "[1]" in (reply.choices[0].message.content or "")
    paper = asyncio.run(asyncio.wait_for(_get_paper(f"{chat}/mcp", {"authorization": "Bearer k3y"}), timeout=90))
    assert not paper.is_error
    # a forged cookie is no session
    forged = "; ".join(f"{name}=x{value}" for name, value in login.cookies.items())
    assert _completion(chat, cookie=forged).status_code == 401


@pytest.mark.slow
def test_the_door_refuses_foreign_hosts_origins_big_bodies_and_deep_json(chat) -> None:
    key = {"authorization": "Bearer k3y"}
    assert _completion(chat, host="evil.example", **key).status_code == 421
    assert _completion(chat, origin="http://evil.example", **key).status_code == 403
    form = httpx.post(f"{chat}/v1/chat/completions", headers={**key, "content-type": "text/plain"},
                      content=json.dumps({"messages": [{"role": "user", "content": QUESTION}]}))
    assert form.status_code == 415
    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (2 << 20) + b'"}]}'
    declared = httpx.post(f"{chat}/v1/chat/completions", content=big,
                          headers={**key, "content-type": "application/json"})
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: the size shows only while reading
        for start in range(0, len(big), 65536):
            yield big[start:start + 65536]

    streamed = httpx.post(f"{chat}/v1/chat/completions", content=chunks(),
                          headers={**key, "content-type": "application/json"})
    assert streamed.status_code == 413
    with httpx.Client(headers=key, timeout=60) as http:  # one connection: the next request still answers
        deep = http.post(f"{chat}/v1/chat/completions", content=b"[" * 100_000 + b"]" * 100_000,
                         headers={"content-type": "application/json"})
        assert deep.status_code == 400 and "nested" in deep.json()["error"]["message"]
        assert http.get(f"{chat}/v1/models").status_code == 200


@pytest.mark.slow
def test_the_login_throttle_ignores_x_forwarded_for(chat) -> None:
    """Rotating X-Forwarded-For from loopback used to count as new clients: never locked out."""
    codes = [_login(chat, "bob", f"wrong{i}", **{"x-forwarded-for": f"203.0.113.{i}"}).status_code
             for i in range(5)]
    assert codes == [400] * 5
    assert _login(chat, "bob", "b0b", **{"x-forwarded-for": "198.51.100.7"}).status_code == 400, "locked out"


@pytest.mark.slow
@pytest.mark.parametrize("command, env", [
    ("serve", {}),
    ("serve", {"RAG_BOT_API_KEY": "k"}),
    ("api", {}),
])
def test_a_network_bind_with_an_open_route_does_not_start(tmp_path, command, env) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    storage = tmp_path / "store"
    done = subprocess.run([RAG_BOT, command], env={**base, **env, "RAG_BOT_HOST": "0.0.0.0",
                                                   "RAG_BOT_STORAGE": str(storage), "RAG_BOT_PORT": str(free_port())},
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode != 0
    assert "refusing to start" in done.stderr and "0.0.0.0" in done.stderr
    assert "Traceback" not in done.stderr
    assert not storage.exists(), "nothing is created by a server that does not start"


def test_sessions_read_the_chat_logins() -> None:
    class App:
        cookie_id = "c1"
        tokens = {"t0k": "ann"}

    sessions = Sessions()
    assert sessions.user({"access-token-c1": "t0k"}) is None, "no app mounted yet"
    sessions.app = App()
    assert sessions.user({"access-token-c1": "t0k"}) == "ann"
    assert sessions.user({"access-token-unsecure-c1": "t0k"}) == "ann"
    assert sessions.user({"access-token-c1": "other"}) is None


@pytest.mark.slow
def test_failed_logins_with_huge_user_names_keep_bounded_state(engine) -> None:
    """Each failed /login with a new ~1 MB user name used to keep that megabyte in the server for good."""
    from rag_bot.surfaces.ui.app import LoginThrottle, build_app, chat_server

    throttle = LoginThrottle([("ann", "s3cret"), ("bob", "b0b")], max_entries=20)
    with serving(chat_server(build_app(engine), engine, throttle)) as base:
        assert [_login(base, "bob", f"wrong{i}").status_code for i in range(5)] == [400] * 5
        for i in range(40):  # just under the door's 1 MiB body
            assert _login(base, f"{i:03d}" + "u" * 900_000, "guess").status_code == 400
        assert len(throttle.attempts) == 20
        assert all(len(user) == 32 for user, _ in throttle.attempts), "a digest of each name, not the name"
        assert _login(base, "bob", "b0b").status_code == 400, "bob is still locked out"
        assert _login(base, "ann", "s3cret").status_code == 200
