"""A stub of the OpenAI API for tests: a real HTTP server on loopback that speaks the chat-completions API (JSON,
and server-sent events when `stream` is set), scripted per test with replies, error statuses and delays, and
recording every request it receives. The OpenAI API itself is paid and unreachable from CI; this is the only
stand-in the suite uses."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """What the stub answers to one request."""

    text: str = ""
    status: int = 200
    delay: float = 0.0  # seconds before the reply starts
    fail_after: int | None = None  # streaming: send an error event after this many chunks
    headers: dict[str, str] = field(default_factory=dict)


class StubOpenAI:
    """A stub of the OpenAI chat-completions API on 127.0.0.1 (a real HTTP server in a thread)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.queue: list[Reply] = []  # replies for the next requests, in order
        self.default: Callable[[dict], Reply] = lambda body: Reply(text="The answer [1].")
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._error(404, "not found", "invalid_request_error")
                    return
                stub.requests.append(body)
                stub.auth.append(self.headers.get("Authorization", ""))
                reply = stub.queue.pop(0) if stub.queue else stub.default(body)
                time.sleep(reply.delay)
                try:
                    if reply.status != 200:
                        self._error(reply.status, f"stub error {reply.status}", "stub_error", reply.headers)
                    elif body.get("stream"):
                        self._stream(body, reply)
                    else:
                        self._json(200, _completion(body, reply.text))
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): expected
                    pass

            def _json(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
                code = {401: "invalid_api_key", 404: "model_not_found"}.get(status, kind)
                self._json(status, {"error": {"message": message, "type": kind, "code": code}}, headers)

            def _stream(self, body: dict, reply: Reply) -> None:
                text = reply.text
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                # Small pieces, so that markers like "[12]" arrive split across chunks as real tokens do.
                pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
                for i, piece in enumerate(pieces):
                    if i == reply.fail_after:
                        self._event({"error": {"message": "the model is overloaded", "type": "server_error"}})
                        return
                    delta = {"content": piece} if i else {"role": "assistant", "content": piece}
                    self._event(_chunk(body, delta, None))
                self._event(_chunk(body, {}, "stop"))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _event(self, payload: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """The base URL clients use (OPENAI_BASE_URL)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reset(self) -> None:
        """Forget earlier requests and scripts."""
        self.requests.clear()
        self.auth.clear()
        self.queue.clear()
        self.default = lambda body: Reply(text="The answer [1].")

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def _completion(body: dict, text: str) -> dict:
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def _chunk(body: dict, delta: dict, finish: str | None) -> dict:
    return {
        "id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time()),
        "model": body.get("model"), "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def user_prompt(body: dict) -> str:
    """The last user message of a request."""
    return [m["content"] for m in body["messages"] if m["role"] == "user"][-1]


def source_titles(body: dict) -> list[str]:
    """The titles of the numbered sources in an answer request, in order (source n = item n-1)."""
    return re.findall(r'<source id="\d+">\nTitle: (.*)\n', user_prompt(body))


def is_rewrite(body: dict) -> bool:
    """Whether a request asks to rewrite a follow-up (the condense prompt) rather than for an answer."""
    return "Standalone question:" in user_prompt(body)
