"""One door for the HTTP routes served beside the chat (`/v1`, `/mcp`) and by `rag-bot api`.

A request passes the door when its `Host` is one this server answers to (no DNS rebinding), its `Origin`, if any,
is the server itself (no cross-site requests from a page the user happens to visit), a POST says it carries JSON,
its body is at most `MAX_BODY` bytes, and, when logins or a key are configured, it carries the chat's login
session cookie or `Authorization: Bearer <RAG_BOT_API_KEY>`. Refusals use OpenAI's error format. `open_routes`
is the start-up check: a bind beyond loopback with any route that needs no credential does not start.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from rag_bot.settings import Settings

log = logging.getLogger(__name__)


# Largest request body: a question is capped at 4,000 characters (rag_bot.question) and a long answer is about
# 6 kB, so 1 MiB holds a conversation of about a hundred turns; a 200 MB body no longer reaches the JSON parser (it
# took the server to 1.09 GB).
MAX_BODY = 1 << 20
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def host_name(value: str) -> str:
    """A Host header or bind address without its port and brackets, lower case ("[::1]:7860" -> "::1")."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].split("]", 1)[0]
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value  # a bare IPv6 address or a name without a port


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    name = host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # another host name: assume it is reachable from the network


def allowed_hosts(bind: str) -> frozenset[str] | None:
    """The Host names a server bound to `bind` answers to; None (any) for a wildcard bind, whose public names
    cannot be known (a login or a key is then required by `open_routes`)."""
    name = host_name(bind)
    if name in _WILDCARDS:
        return None
    return LOOPBACK_NAMES | {name}


def open_routes(host: str, logins: bool, api_key: str | None, chat: bool = True) -> str | None:
    """Why a server on `host` must not start (None when it may): beyond loopback, every route needs a credential.
    With logins the chat, /v1 and /mcp all need one (a session or the key); without, the key guards only /v1 and
    /mcp, and the chat is open. `chat`: False for `rag-bot api`, which serves /v1 alone."""
    if is_loopback(host):
        return None
    if chat and not logins:
        return (f"the chat would listen on {host} without a login: anyone who can reach this machine could read "
                f"the collection, ask questions and upload files. Set RAG_BOT_AUTH=user:password (or a file of "
                f"such lines), or RAG_BOT_HOST=127.0.0.1.")
    if not chat and not api_key:
        return (f"the API would listen on {host} without a key: anyone who can reach this machine could use it. "
                f"Set RAG_BOT_API_KEY, or RAG_BOT_HOST=127.0.0.1.")
    return None


def http_server(app: ASGIApp, host: str, port: int) -> uvicorn.Server:
    """The uvicorn server `serve` and `rag-bot api` run. proxy_headers off: uvicorn would otherwise take a loopback
    client's address from X-Forwarded-For, and a client rotating that header would never be locked out by the
    login throttle (which counts failures per user and client address)."""
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", proxy_headers=False))


class Sessions:
    """The chat's login sessions (Gradio's `/login` cookie), read from the Gradio app once it is mounted."""

    def __init__(self) -> None:
        self.app: Any = None  # gradio.routes.App: its `tokens` map session tokens to users

    def user(self, cookies: dict[str, str]) -> str | None:
        """The logged-in user of a request's cookies, or None."""
        app = self.app
        if app is None:
            return None
        for name in (f"access-token-{app.cookie_id}", f"access-token-unsecure-{app.cookie_id}"):
            token = cookies.get(name)
            if token and token in app.tokens:
                return str(app.tokens[token])
        return None


@dataclass(frozen=True)
class Door:
    """What a request needs to pass: see the module's docstring."""

    api_key: str | None = None
    sessions: Sessions | None = None  # logins on: a session cookie passes
    hosts: frozenset[str] | None = LOOPBACK_NAMES
    max_body: int = MAX_BODY

    @classmethod
    def of(cls, settings: Settings, sessions: Sessions | None = None, api_key: str | None = None) -> Door:
        """The door for a server with these settings (`api_key` overrides RAG_BOT_API_KEY)."""
        return cls(api_key=api_key or getattr(settings, "api_key", None) or None, sessions=sessions,
                   hosts=allowed_hosts(getattr(settings, "host", "127.0.0.1")))

    def refusal(self, method: str, headers: dict[str, str], cookies: dict[str, str]) -> tuple[int, str, str] | None:
        """(status, message, code) of a request that may not pass, or None."""
        host = headers.get("host", "")
        if self.hosts is not None and host_name(host) not in self.hosts:
            return 421, f"this server does not answer to the host {host_name(host)!r}", "invalid_host"
        origin = headers.get("origin")
        if origin is not None and not self._origin_ok(origin, host):
            return 403, "cross-origin requests are not accepted", "invalid_origin"
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if method == "POST" and media != "application/json":
            return 415, "the request body must be JSON (Content-Type: application/json)", "invalid_content_type"
        if not self.api_key and self.sessions is None:
            return None
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if self.api_key and scheme.lower() == "bearer" and secrets.compare_digest(
                token.strip().encode("utf-8", "replace"), self.api_key.encode("utf-8")):
            return None
        if self.sessions is not None and self.sessions.user(cookies):
            return None
        ways = " or ".join(w for w, on in (("a login session of the chat (POST /login)", self.sessions is not None),
                                           ("'Authorization: Bearer <RAG_BOT_API_KEY>'", bool(self.api_key))) if on)
        return 401, f"not logged in: send {ways}", "invalid_api_key"

    def _origin_ok(self, origin: str, host: str) -> bool:
        # The server's own pages, and (as the MCP SDK allows) local pages of this machine when it binds a known
        # address; a page on any other site is refused.
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        if parts.netloc.lower() == host.strip().lower():
            return True
        return self.hosts is not None and host_name(parts.netloc) in self.hosts

    def guard(self, app: ASGIApp) -> Guarded:
        """`app` behind this door."""
        return Guarded(app, self)


class Guarded:
    """An ASGI app behind a `Door` (a class, not a function: Starlette's `Route` calls a function endpoint with a
    `Request`, an object with the ASGI signature)."""

    def __init__(self, app: ASGIApp, door: Door) -> None:
        self.app, self.door = app, door

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        door = self.door
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        refused = door.refusal(scope.get("method", "GET"), headers, _cookies(headers.get("cookie", "")))
        if refused:
            log.info("refused %s %s: %s", scope.get("method"), scope.get("path"), refused[1])
            await _error(send, *refused)
            return
        too_large = (413, f"the request body is over {door.max_body} bytes", "request_too_large")
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > door.max_body:
            await _error(send, *too_large)
            return
        body = bytearray()
        while True:  # read (at most max_body bytes of) the body before the app sees any of it
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            body += message.get("body", b"")
            if len(body) > door.max_body:
                await _error(send, *too_large)
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay([{"type": "http.request", "body": bytes(body), "more_body": False}], receive),
                       send)


def _cookies(header: str) -> dict[str, str]:
    from http.cookies import CookieError, SimpleCookie

    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _replay(messages: list[Message], receive: Receive) -> Receive:
    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay


async def _error(send: Send, status: int, message: str, code: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": code}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
