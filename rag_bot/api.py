"""An OpenAI-compatible API over the engine: `GET /v1/models` and `POST /v1/chat/completions` (streaming and not).

Chat front-ends that speak the OpenAI API (Open WebUI, LibreChat, editors, the `openai` package) can ask the
collection. The model name selects the mode (`rag-bot` detects it from the question, `rag-bot-summary`,
`rag-bot-compare`); the messages become the question (the last user message) and the history (earlier
user/assistant pairs), so follow-ups work as in the chat. The answer text keeps its `[n]` markers and ends with a
"References" list; the structured citations travel in the extension field `rag_bot` of the completion (and of the
final streamed chunk). Requests pass a `Door` (rag_bot/access.py): host and origin checks, a body limit and, with
`RAG_BOT_API_KEY` (or logins beside the chat) set, `Authorization: Bearer <key>` (or the chat's login session).
Errors use OpenAI's error format, `{"error": {"message", "type", "param", "code"}}`.

Served alone by `rag-bot api`, or beside the chat with `mount_api(fastapi_app, engine)` before Gradio is mounted.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_bot.access import Door, http_server, open_routes
from rag_bot.errors import EmptyQuestionError, NoIndexError, StoreError
from rag_bot.types import Answer, Citation, Filters, Mode, Turn

log = logging.getLogger(__name__)

MODELS: dict[str, Mode | None] = {"rag-bot": None, "rag-bot-summary": "summary", "rag-bot-compare": "compare"}
DEFAULT_MODEL = "rag-bot"
REFERENCES_HEADING = "References"
OWNER = "rag-bot"
_REFERENCE = re.compile(r"^\[(\d+)\]\s+(.*?)\s+\(([^()\s]+)\)\s*$")
_CREATED = int(time.time())


class APIError(Exception):
    """An error answered in OpenAI's format."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


# --- messages -> question and history ------------------------------------------------------------------------
def message_text(content: Any) -> str:
    """The text of a message's content: a string, or OpenAI's list of parts (text parts are kept)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text") and isinstance(
                part.get("text"), str
            ):
                parts.append(part["text"])
        return "\n".join(parts)
    raise APIError(400, "a message's content must be a string or a list of content parts", param="messages")


def split_references(text: str) -> tuple[str, list[Citation]]:
    """An assistant message as this API wrote it: its answer text and the citations of its References list."""
    lines = text.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip().rstrip(":") == REFERENCES_HEADING:
            refs = [_REFERENCE.match(line.strip()) for line in lines[i + 1:] if line.strip()]
            if refs and all(refs):
                citations = [Citation(n=int(m[1]), doc_id=m[3], title=m[2], source="", quote="") for m in refs if m]
                return "\n".join(lines[:i]).rstrip(), citations
            break
    return text.strip(), []


def conversation(messages: Any, mode: Mode | None) -> tuple[str, list[Turn]]:
    """The question (the last user message) and the earlier turns (each user message with the assistant's reply)."""
    if not isinstance(messages, list) or not messages:
        raise APIError(400, "'messages' must be a non-empty list of messages", param="messages")
    turns: list[Turn] = []
    question: str | None = None
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise APIError(400, "each message must be an object with a 'role'", param="messages")
        role, text = message["role"], message_text(message.get("content"))
        if role == "user":
            if question is not None:
                turns.append(Turn(question=question))
            question = text
        elif role == "assistant" and question is not None:
            body, citations = split_references(text)
            answer = Answer(question=question, mode=mode or "ask", answer=body, grounded=bool(citations),
                            citations=citations, retrieved=[])
            turns.append(Turn(question=question, answer=answer))
            question = None
        # system, developer and tool messages do not change what is asked
    if question is None:
        raise APIError(400, "the conversation must end with a user message (the question)", param="messages")
    return question, turns


# --- answers -> OpenAI shapes ------------------------------------------------------------------------------
def references(answer: Answer) -> str:
    """The References list appended to the answer text ('' when nothing is cited); raw: each caller sanitises the
    text it appends it to, as one (`rag_bot.sanitize`)."""
    if not answer.citations:
        return ""
    lines = [f"[{c.n}] {c.title} ({c.doc_id})" for c in answer.citations]
    return f"\n\n{REFERENCES_HEADING}:\n" + "\n".join(lines)


def extension(answer: Answer) -> dict[str, Any]:
    """The `rag_bot` extension field: the JSON contract's citations, grounded and retrieved, the mode, a notice;
    their titles, quotes and notice made safe for Markdown clients, any url http(s) only (`rag_bot.sanitize`)."""
    from rag_bot.sanitize import markdown_safe, safe_fields

    return {
        "citations": [safe_fields(c.model_dump()) for c in answer.citations],  # as in the JSON contract
        "grounded": answer.grounded,
        "retrieved": [safe_fields(r) for r in answer.retrieved],
        "mode": answer.mode,
        "llm": answer.llm,
        "notice": markdown_safe(answer.notice) if answer.notice else answer.notice,
    }


@lru_cache(maxsize=1)
def _word_pieces() -> Any:
    """The shipped model's tokenizer, untruncated: what `usage` counts in."""
    from tokenizers import Tokenizer

    from rag_bot.embedding import model_files

    tokenizer = Tokenizer.from_file(str(model_files()[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def usage(prompt: str, content: str) -> dict[str, int]:
    """OpenAI's `usage` in word pieces of the shipped model (no model is billed: clients read it, some need it)."""
    counts = [len(e.ids) - 2 if text else 0 for text, e in zip((prompt, content),
                                                              _word_pieces().encode_batch([prompt, content]))]
    return {"prompt_tokens": counts[0], "completion_tokens": counts[1], "total_tokens": sum(counts)}


def prompt_text(messages: Any) -> str:
    """The text of a request's messages, as `usage` counts it."""
    parts = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(parts)


def completion(answer: Answer, model: str, prompt: str = "") -> dict[str, Any]:
    """A `chat.completion` object, its text made safe for Markdown clients (`rag_bot.sanitize`)."""
    from rag_bot.sanitize import markdown_safe

    content = markdown_safe(answer.answer + references(answer))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": usage(prompt, content),
        "rag_bot": extension(answer),
    }


def _chunk(cid: str, created: int, model: str, delta: dict[str, Any], finish: str | None = None,
           **extra: Any) -> str:
    chunk = {
        "id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


def sse(events: Iterator[str | Answer], first: str | Answer | None, model: str,
        prompt: str | None = None) -> Iterator[str]:
    """Server-sent events of a streamed answer: text deltas, the References list, then a final chunk with
    `finish_reason` "stop" and the `rag_bot` field, then (when `prompt` is given: `stream_options.include_usage`)
    a chunk with no choices and the `usage`, then `data: [DONE]`."""
    from rag_bot.sanitize import MarkdownStream

    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    yield _chunk(cid, created, model, {"role": "assistant", "content": ""})
    shown: list[str] = []
    sent: list[str] = []  # the content as the client receives it (sanitised), which `usage` counts
    answer: Answer | None = None
    # The deltas sanitised as one text (the same as the unstreamed answer's): an image or a tag split across
    # deltas is held back until it is whole.
    safe = MarkdownStream()

    def _ended(error: APIError) -> Iterator[str]:  # what was held back, then the error, then the end
        if rest := safe.close():
            yield _chunk(cid, created, model, {"content": rest})
        yield f"data: {json.dumps(error.body())}\n\n"
        yield "data: [DONE]\n\n"

    try:
        for event in _chain([first] if first is not None else [], events):
            if isinstance(event, Answer):
                answer = event
            elif event:
                shown.append(event)
                if piece := safe.feed(event):
                    sent.append(piece)
                    yield _chunk(cid, created, model, {"content": piece})
    except Exception as exc:  # headers are sent: the error goes in the stream, in OpenAI's format
        log.warning("streamed answer failed (%s)", type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
        yield from _ended(_error_of(exc))
        return
    if answer is None:
        yield from _ended(APIError(500, "the answer stream ended early", "server_error"))
        return
    text = "".join(shown).strip()
    tail = ""
    if text != answer.answer.strip():
        # The model failed mid-answer and the offline composer answered instead: the checked answer is what counts.
        tail = ("\n\n---\n" if text else "") + answer.answer
    tail += references(answer)
    if rest := safe.feed(tail) + safe.close():
        sent.append(rest)
        yield _chunk(cid, created, model, {"content": rest})
    yield _chunk(cid, created, model, {}, "stop", rag_bot=extension(answer))
    if prompt is not None:
        chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                 "system_fingerprint": None, "choices": [], "usage": usage(prompt, "".join(sent))}
        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"


def _chain(first: list[str | Answer], rest: Iterator[str | Answer]) -> Iterator[str | Answer]:
    yield from first
    yield from rest


def _error_of(exc: BaseException) -> APIError:
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, EmptyQuestionError):
        return APIError(400, "the question (the last user message) is empty", code="empty_question",
                        param="messages")
    if isinstance(exc, NoIndexError):
        return APIError(503, f"{exc}", "server_error", code="no_index")
    if isinstance(exc, StoreError):
        return APIError(503, f"{exc}", "server_error", code="store_unavailable")
    return APIError(500, f"unexpected error ({type(exc).__name__}); see the server's log", "server_error")


# --- the app ---------------------------------------------------------------------------------------------
def request_filters(body: dict[str, Any]) -> Filters | None:
    """The filters of a request's `rag_bot` extension field: {"filters": {"venue", "year", "author", "source"}}."""
    extension = body.get("rag_bot") or {}
    raw = extension.get("filters") if isinstance(extension, dict) else None
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(isinstance(v, str | int) or v is None for v in raw.values()):
        raise APIError(400, "rag_bot.filters must be an object of venue, year, author and source", param="rag_bot")
    unknown = set(raw) - {"venue", "year", "author", "source"}
    if unknown:
        raise APIError(400, f"unknown filter(s): {', '.join(sorted(unknown))}", param="rag_bot")
    try:
        return Filters.parse(**{k: None if v is None else str(v) for k, v in raw.items()})
    except ValueError as exc:
        raise APIError(400, str(exc), param="rag_bot") from None


def v1_app(engine: Any) -> FastAPI:
    """The `/v1` routes as an app of their own (mounted at /v1, behind a `Door`, by `create_api` and `mount_api`)."""
    app = FastAPI(title="rag-bot OpenAI-compatible API", version="1", docs_url="/docs", redoc_url=None)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        return APIError(exc.status_code, str(exc.detail), code=code).response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return APIError(400, "invalid request").response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.warning("API request failed (%s)", type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
        return _error_of(exc).response()

    @app.get("/models")
    async def list_models(request: Request) -> dict[str, Any]:
        return {"object": "list", "data": [_model(name) for name in MODELS]}

    @app.get("/models/{name}")
    async def get_model(name: str, request: Request) -> dict[str, Any]:
        if name not in MODELS:
            raise _unknown_model(name)
        return _model(name)

    @app.post("/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            raise APIError(400, "the request body is not valid JSON") from None
        except RecursionError:  # json's parser recurses per level: a deeply nested body is not a request
            raise APIError(400, "the request body is nested too deeply") from None
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        model = body.get("model") or DEFAULT_MODEL
        if not isinstance(model, str) or model not in MODELS:
            raise _unknown_model(str(model))
        mode = MODELS[model]
        if "messages" not in body:
            raise APIError(400, "'messages' is required", code="missing_required_parameter", param="messages")
        question, history = conversation(body["messages"], mode)
        filters = request_filters(body)
        if not body.get("stream"):
            try:
                answer = await run_in_threadpool(engine.ask, question, mode, history, None, filters)
            except Exception as exc:
                raise _error_of(exc) from exc
            return JSONResponse(completion(answer, model, prompt_text(body["messages"])))
        events = engine.stream(question, mode=mode, history=history, filters=filters)
        try:  # the first step retrieves: its errors (empty question, no index) still get a status code
            first = await run_in_threadpool(next, events, None)
        except Exception as exc:
            raise _error_of(exc) from exc
        options = body.get("stream_options")
        counted = prompt_text(body["messages"]) if isinstance(options, dict) and options.get("include_usage") else None
        return StreamingResponse(sse(events, first, model, counted), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": _CREATED, "owned_by": OWNER}


def _unknown_model(name: str) -> APIError:
    return APIError(404, f"The model '{name}' does not exist; use one of: {', '.join(MODELS)}",
                    code="model_not_found", param="model")


def mount_api(app: FastAPI, engine: Any, path: str = "/v1", api_key: str | None = None,
              door: Door | None = None) -> FastAPI:
    """Mount the API on an existing FastAPI app (before Gradio is mounted at "/", so that /v1 is matched first),
    behind `door` (default: the engine's settings, with `api_key` over RAG_BOT_API_KEY)."""
    door = door or Door.of(engine.settings, api_key=api_key)
    app.mount(path, door.guard(v1_app(engine)))  # type: ignore[arg-type]
    return app


def create_api(engine: Any, api_key: str | None = None) -> FastAPI:
    """The API alone: /v1/models and /v1/chat/completions (and /v1/docs), behind the engine's `Door`."""
    app = FastAPI(title="rag-bot", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/")
    async def root() -> dict[str, Any]:
        return {"name": "rag-bot", "api": "/v1", "models": list(MODELS)}

    return mount_api(app, engine, api_key=api_key)


def serve_api(settings: Any, port: int | None = None) -> None:
    """Serve the API alone with uvicorn on RAG_BOT_HOST and the given port (default 8000)."""
    import sys

    from rag_bot.engine import Engine

    problem = open_routes(settings.host, logins=False, api_key=settings.api_key, chat=False)
    if problem:
        raise SystemExit(f"rag-bot: refusing to start: {problem}")
    engine = Engine(settings)
    engine.require_index()
    engine.retriever  # load BM25 and names before the first question  # noqa: B018
    port = port or 8000
    print(f"rag-bot API on http://{settings.host}:{port}/v1"
          f"{' (bearer key required)' if getattr(settings, 'api_key', None) else ''}", file=sys.stderr)
    http_server(create_api(engine), settings.host, port).run()
