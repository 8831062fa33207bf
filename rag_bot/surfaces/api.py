"""An OpenAI-compatible API over the engine: `GET /v1/models` and `POST /v1/chat/completions` (streaming and not).

Chat front-ends that speak the OpenAI API (Open WebUI, LibreChat, editors, the `openai` package) can ask the
collection. The model name selects the mode (`rag-bot` detects it from the question, `rag-bot-summary`,
`rag-bot-compare`); the messages become the question (the last user message) and the history (earlier
user/assistant pairs), so follow-ups work as in the chat. The answer text keeps its `[n]` markers and ends with a
"References" list; the structured citations travel in the extension field `rag_bot` of the completion (and of the
final streamed chunk). Requests pass a `Door` (rag_bot/surfaces/access.py): host and origin checks, a body limit and, with
`RAG_BOT_API_KEY` (or logins beside the chat) set, `Authorization: Bearer <key>` (or the chat's login session).
Errors use OpenAI's error format, `{"error": {"message", "type", "param", "code"}}`.

Served alone by `rag-bot api`, or beside the chat with `mount_api(fastapi_app, engine)` before Gradio is mounted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_bot.surfaces.access import Door, http_server, open_routes
from rag_bot.surfaces.openai_format import (
    CREATED,
    DEFAULT_MODEL,
    APIError,
    completion,
    conversation,
    error_of,
    prompt_text,
    sse,
)
from rag_bot.types import Filters, Mode

if TYPE_CHECKING:
    from rag_bot.interfaces import EngineView
    from rag_bot.settings import Settings

log = logging.getLogger(__name__)

MODELS: dict[str, Mode | None] = {"rag-bot": None, "rag-bot-summary": "summary", "rag-bot-compare": "compare"}
OWNER = "rag-bot"






# --- the app ---------------------------------------------------------------------------------------------
def request_filters(body: dict[str, object]) -> Filters | None:
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


def v1_app(engine: EngineView) -> FastAPI:
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
        return error_of(exc).response()

    @app.get("/models")
    async def list_models(request: Request) -> dict[str, object]:
        return {"object": "list", "data": [_model(name) for name in MODELS]}

    @app.get("/models/{name}")
    async def get_model(name: str, request: Request) -> dict[str, object]:
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
                raise error_of(exc) from exc
            return JSONResponse(completion(answer, model, prompt_text(body["messages"])))
        events = engine.stream(question, mode=mode, history=history, filters=filters)
        try:  # the first step retrieves: its errors (empty question, no index) still get a status code
            first = await run_in_threadpool(next, events, None)
        except Exception as exc:
            raise error_of(exc) from exc
        options = body.get("stream_options")
        counted = prompt_text(body["messages"]) if isinstance(options, dict) and options.get("include_usage") else None
        return StreamingResponse(sse(events, first, model, counted), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app


def _model(name: str) -> dict[str, object]:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": OWNER}


def _unknown_model(name: str) -> APIError:
    return APIError(404, f"The model '{name}' does not exist; use one of: {', '.join(MODELS)}",
                    code="model_not_found", param="model")


def mount_api(app: FastAPI, engine: EngineView, path: str = "/v1", api_key: str | None = None,
              door: Door | None = None) -> FastAPI:
    """Mount the API on an existing FastAPI app (before Gradio is mounted at "/", so that /v1 is matched first),
    behind `door` (default: the engine's settings, with `api_key` over RAG_BOT_API_KEY)."""
    door = door or Door.of(engine.settings, api_key=api_key)
    app.mount(path, door.guard(v1_app(engine)))  # type: ignore[arg-type]
    return app


def create_api(engine: EngineView, api_key: str | None = None) -> FastAPI:
    """The API alone: /v1/models and /v1/chat/completions (and /v1/docs), behind the engine's `Door`."""
    app = FastAPI(title="rag-bot", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/")
    async def root() -> dict[str, object]:
        return {"name": "rag-bot", "api": "/v1", "models": list(MODELS)}

    return mount_api(app, engine, api_key=api_key)


def serve_api(settings: Settings, port: int | None = None) -> None:
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
