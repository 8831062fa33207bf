"""The page: the panels put together (`build_app`), logins, upload checks, first indexing and `serve`."""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_bot.errors import NoIndexError, StoreError
from rag_bot.logs import configure_logging
from rag_bot.settings import Settings
from rag_bot.surfaces.access import Door, Sessions, http_server, open_routes
from rag_bot.surfaces.ui.assets import CSS, HEAD

if TYPE_CHECKING:
    from fastapi import FastAPI

    from rag_bot.engine import Engine
    from rag_bot.surfaces.ui.base import Library, PageEngine, PendingEngine

log = logging.getLogger(__name__)

# Answers run side by side in this many of Gradio's queue slots (uploads have their own, see collection.py).
ANSWER_CONCURRENCY = 8
# Failed-login pairs (user, client) kept at most (LoginThrottle): 440 bytes a pair measured with tracemalloc
# (10,000 names from 10,000 addresses: 4.4 MB in all), while a site's real users from their addresses make a few
# hundred pairs; a flood of made-up names beyond it drops the oldest first (tests/surfaces/ui/test_app.py).
MAX_LOGIN_ENTRIES = 10_000

def auth_pairs(value: str | None) -> list[tuple[str, str]] | None:
    """RAG_BOT_AUTH as Gradio logins: `user:password`, or a file of such lines (# comments allowed)."""
    if not value:
        return None
    path = Path(value).expanduser()
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else [value]
    pairs = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user.strip() or not password:
            raise ValueError("RAG_BOT_AUTH must be user:password or a file of user:password lines")
        pairs.append((user.strip(), password))
    if not pairs:
        raise ValueError(f"RAG_BOT_AUTH file {path} holds no user:password line")
    return pairs


@dataclass
class _Attempts:
    """One (user, client)'s recent failed logins, lockouts so far and the end of the current one."""

    failures: list[float] = field(default_factory=list)
    lockouts: int = 0
    locked_until: float = 0.0


class LoginThrottle:
    """Gradio's `auth` callable: checks a user:password, but after `max_failures` wrong attempts for a user
    from one client within `window` seconds, rejects that user from that client without checking for a
    lockout that doubles with each further lockout (from `window`, at most `max_lockout`). A success resets.

    Its memory is bounded whatever the login form is sent: a user name is kept as a 32-byte digest, and at most
    `max_entries` (user, client) pairs are kept, the least recently seen one dropped first (one still locked out
    only when every kept pair is)."""

    def __init__(self, pairs: list[tuple[str, str]], max_failures: int = 5, window: float = 60.0,
                 max_lockout: float = 3600.0, clock: Callable[[], float] = time.monotonic,
                 max_entries: int = MAX_LOGIN_ENTRIES) -> None:
        self.passwords = dict(pairs)
        self.max_failures = max_failures
        self.window = window
        self.max_lockout = max_lockout
        self.clock = clock
        self.max_entries = max_entries
        self.attempts: OrderedDict[tuple[bytes, str], _Attempts] = OrderedDict()
        self.lock = threading.Lock()

    def __call__(self, username: str, password: str) -> bool:
        return self.check(username, password, _login_client())

    def check(self, username: str, password: str, client: str = "?") -> bool:
        """Whether this user:password logs in from `client` now (False while that pair is locked out)."""
        key = (hashlib.sha256(username.encode("utf-8", "replace")).digest(), client[:64])
        shown = username[:64]  # a log line never carries a megabyte of user name
        now = self.clock()
        with self.lock:
            attempts = self.attempts.get(key)
            if attempts is not None and attempts.locked_until > now:
                log.warning("login for %r from %s refused unchecked: locked out for %.0f s more", shown, client,
                            attempts.locked_until - now)
                return False
            expected = self.passwords.get(username)
            if expected is not None and hmac.compare_digest(password.encode("utf-8", "replace"),
                                                            expected.encode("utf-8", "replace")):
                self.attempts.pop(key, None)
                return True
            if attempts is None:
                self._make_room(now)
                attempts = self.attempts[key] = _Attempts()
            self.attempts.move_to_end(key)
            attempts.failures = [t for t in attempts.failures if now - t < self.window] + [now]
            if len(attempts.failures) >= self.max_failures:
                seconds = min(self.window * 2**attempts.lockouts, self.max_lockout)
                attempts.lockouts += 1
                attempts.locked_until = now + seconds
                log.warning("%d failed logins for %r from %s within %.0f s: locked out for %.0f s",
                            len(attempts.failures), shown, client, self.window, seconds)
                attempts.failures = []
            return False

    def _make_room(self, now: float) -> None:
        """Room for one more pair within `max_entries`: the least recently seen go, passing over (once) those locked
        out, so a flood of made-up names cannot free a locked-out user to guess again."""
        for _ in range(len(self.attempts)):
            if len(self.attempts) < self.max_entries:
                return
            key, oldest = next(iter(self.attempts.items()))
            if oldest.locked_until > now:
                self.attempts.move_to_end(key)
            else:
                del self.attempts[key]
        while self.attempts and len(self.attempts) >= self.max_entries:  # all locked out: the oldest goes anyway
            self.attempts.popitem(last=False)


def _login_client() -> str:
    """The address of the client whose login Gradio is checking. Gradio calls `auth(username, password)` from
    its /login route without the request, so it is taken from that route's frame; "?" if not found."""
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            break
        request = frame.f_locals.get("request")
        client = getattr(request, "client", None)
        if client is not None:
            return str(getattr(client, "host", "?"))
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def ensure_index(engine: Engine) -> None:
    """Index the seeds folder when the store is empty (first `make run`), with a progress bar on stderr."""
    if engine.index.count() > 0:
        return
    from tqdm import tqdm

    log.info("No index yet: indexing %s ...", engine.settings.seed_path())
    bar: Any = None

    def on_read(result: Any) -> None:
        nonlocal bar
        for problem in result.problems:
            log.warning("%s", problem)
        bar = tqdm(total=len(result.papers), unit="paper", desc="Indexing", file=sys.stderr)

    engine.ingest([engine.settings.seed_path()], progress=lambda n: bar.update(n), on_read=on_read)
    if bar is not None:
        bar.close()


def build_app(engine: PageEngine, library: Library | None = None) -> Any:
    """The chat page on an engine: a status line over three tabs (Chat with its sources, Collection, Map).
    `library`: the `Library` view of the engine to use (tests pass their own to look inside)."""
    import gradio as gr

    from rag_bot.surfaces.ui.base import Library, Shared
    from rag_bot.surfaces.ui.chat import ChatPanel
    from rag_bot.surfaces.ui.collection import CollectionPanel
    from rag_bot.surfaces.ui.history import HistoryPanel
    from rag_bot.surfaces.ui.map import MapPanel
    from rag_bot.surfaces.ui.sources import SourcesPanel

    library = library or Library(engine)
    # Gradio's own copies of uploads and exports are deleted after an hour (and all at restart).
    with gr.Blocks(title="rag-bot", analytics_enabled=False, fill_width=True, delete_cache=(600, 3600)) as app:
        gr.Markdown("## rag-bot · cited answers about research abstracts")
        shared = Shared(
            status=gr.Markdown(library.status(), elem_classes="status-line", elem_id="status"),
            turns=gr.State([]),
            conversation=gr.State(None),
        )
        sources = SourcesPanel(library)
        chat = ChatPanel(library, sources, shared)
        collection = CollectionPanel(library, shared)
        cmap = MapPanel(library, shared)
        history = HistoryPanel(library, chat, shared)
        with gr.Tabs():
            with gr.Tab("Chat", id="chat"):
                with gr.Row():
                    with gr.Column(scale=3):
                        chat.render()
                        history.render()
                    with gr.Column(scale=2):
                        sources.render()
            collection.render()
            cmap.render()

        answered = chat.register_events()
        history.register_events(app, answered)
        cmap.refresh_legend(collection.register_events())
        cmap.register_events()
        if not library.loaded:  # built while the engine loads: each page fills in its collection once it is ready
            pending: Any = library.engine  # a PendingEngine (once built, `wait` fails and is passed over)

            def when_ready() -> tuple[object, ...]:
                try:
                    pending.wait()
                except Exception:  # the server stops with the cause (_stop)
                    pass
                return (library.status(), *chat.refreshed(), *collection.refreshed(), *cmap.refreshed())

            app.load(when_ready, None, [shared.status, chat.venue, chat.source, chat.examples, collection.table,
                                        collection.caption, collection.found, cmap.legend, cmap.label],
                     api_visibility="private")
    return app


def serve(settings: Settings | None = None) -> None:
    """Index the seeds if needed, then serve the chat at http://host:port."""
    settings = settings or Settings()
    configure_logging(settings.log_level)  # as `rag-bot serve` does (also for app.py at the root)
    try:
        auth = auth_pairs(settings.auth)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    problem = open_routes(settings.host, logins=bool(auth), api_key=settings.api_key)
    if problem:  # checked before the store is opened: nothing is written by a server that does not start
        log.error("refusing to start: %s", problem)
        raise SystemExit(f"rag-bot: refusing to start: {problem}")
    # The page is served first; the engine (llama-index, chromadb, the store, the lexical side) loads meanwhile
    # in a thread (loading.py), and the first question waits for it.
    from rag_bot.surfaces.ui.base import Library
    from rag_bot.surfaces.ui.loading import PendingEngine

    pending = PendingEngine(settings)
    library = Library(pending)
    app = build_app(pending, library)
    base = f"http://{settings.host}:{settings.port}"
    needs = " or ".join(w for w, on in (("a login", bool(auth)), ("the bearer key", bool(settings.api_key))) if on)
    print(f"rag-bot chat on {base}{' (login required)' if auth else ''}; OpenAI-compatible API at {base}/v1, "
          f"MCP at {base}/mcp{f' ({needs} required)' if needs else ''}", file=sys.stderr)
    pending.start(_build_engine, on_ready=library.attach, on_error=_stop)
    serve_with_api(app, pending, auth)


def _build_engine(pending: PendingEngine) -> Engine:
    """The engine `serve` answers with: the store opened (the seeds indexed into an empty one), the lexical side
    loaded."""
    from rag_bot.engine import Engine
    from rag_bot.topics import asking_words

    engine = Engine(pending.settings)
    if engine.index.count() == 0:
        pending.progress = "Indexing the seed abstracts (first start; the chat answers once they are in)…"
    ensure_index(engine)
    engine.retriever  # load BM25 and names before the first question  # noqa: B018
    asking_words("What is known about this?")  # and the tagger's lexicon (0.3 s): rag_bot/topics.py
    return engine


def _stop(exc: BaseException) -> None:
    """A store that cannot be opened stops `serve` as it did before the page was served: one line, exit 1."""
    from rag_bot.surfaces.ui.base import remove_exports

    known = isinstance(exc, (StoreError, NoIndexError, OSError))
    message = str(exc) if known else (f"unexpected error ({type(exc).__name__}); run with RAG_BOT_LOG_LEVEL=DEBUG "
                                      "for details")
    log.debug("the engine could not be built", exc_info=exc)
    print(f"rag-bot: {message}", file=sys.stderr, flush=True)
    remove_exports()
    os._exit(1)


def serve_with_api(app: Any, engine: PageEngine, auth: list[tuple[str, str]] | None = None) -> None:
    """Serve the chat with the OpenAI-compatible API (/v1) and the MCP endpoint (/mcp) beside it, on one port."""
    http_server(chat_server(app, engine, auth), engine.settings.host, engine.settings.port).run()


def chat_server(app: Any, engine: PageEngine, auth: list[tuple[str, str]] | LoginThrottle | None = None) -> FastAPI:
    """The ASGI app `serve` runs: /v1 and /mcp behind one `Door` (with logins on, the chat's session cookie or the
    API key), the permalinks (open by design: a token is the permission), and the chat at "/". `auth`: the logins,
    or a throttle already holding them."""
    import gradio as gr
    from fastapi import FastAPI
    from starlette.routing import Mount

    from rag_bot.surfaces.api import mount_api
    from rag_bot.surfaces.mcp_server import mount_mcp

    settings = engine.settings
    throttle = auth if isinstance(auth, LoginThrottle) else LoginThrottle(auth) if auth else None
    sessions = Sessions() if throttle else None
    door = Door.of(settings, sessions)
    server = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)  # /v1/docs documents the API, behind the door
    mount_api(server, engine, door=door)  # before Gradio takes "/"
    mount_mcp(server, engine, door=door)
    mount_permalinks(server, engine)
    app.queue(default_concurrency_limit=ANSWER_CONCURRENCY)
    server = gr.mount_gradio_app(
        server, app, path="/",
        auth=throttle,
        auth_message="rag-bot: log in with the user and password from RAG_BOT_AUTH." if throttle else None,
        show_error=False, max_file_size=f"{settings.max_upload_mb}mb", css=CSS, head=HEAD, footer_links=["api"],
        app_kwargs={"openapi_url": None},  # Gradio's own route list, served without a login; the page needs none
    )
    if sessions is not None:  # the sessions live in the Gradio app mounted at "/"
        sessions.app = next(r.app for r in server.routes if isinstance(r, Mount) and r.path == "")
    return server


def mount_permalinks(server: FastAPI, engine: PageEngine) -> None:
    """`GET /answer/<token>`: one saved answer as a small read-only HTML page (anyone holding the token may read
    it; the token is random and unguessable). Everything on it is escaped; the page runs no script."""
    from fastapi.responses import HTMLResponse

    from rag_bot.store.conversations import Conversations
    from rag_bot.surfaces.ui.permalink import permalink_page

    store = Conversations(engine.settings.data_path())
    headers = {
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
                                   "form-action 'none'; frame-ancestors 'none'",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "X-Robots-Tag": "noindex",
        "Cache-Control": "private, no-store",
    }

    @server.get("/answer/{token}", include_in_schema=False)
    def permalink(token: str) -> HTMLResponse:
        saved = store.shared(token)
        if saved is None:
            return HTMLResponse(permalink_page(None, {}), status_code=404, headers=headers)
        return HTMLResponse(permalink_page(saved.turn, engine.papers, saved.time), headers=headers)


def launch(app: Any, settings: Settings, auth: list[tuple[str, str]] | None = None, **kwargs: Any) -> Any:
    """Serve a built app as `serve` does: answers in parallel slots, logins throttled, uploads size-capped."""
    return app.queue(default_concurrency_limit=ANSWER_CONCURRENCY).launch(
        server_name=settings.host,
        server_port=settings.port,
        show_error=False,
        auth=LoginThrottle(auth) if auth else None,
        auth_message="rag-bot: log in with the user and password from RAG_BOT_AUTH." if auth else None,
        max_file_size=f"{settings.max_upload_mb}mb",
        css=CSS,
        head=HEAD,
        footer_links=["api"],
        **kwargs,
    )
