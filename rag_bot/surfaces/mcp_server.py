"""An MCP server over the engine, for agents: tools `search_papers`, `ask` and `get_paper`; each paper as a resource
(`paper://<doc_id>`); prompts `summarize_area` and `compare_papers`.

Built on the official `mcp` package (`MCPServer`). `rag-bot mcp` serves it over
standard input and output; `mount_mcp(fastapi_app, engine)` serves it over streamable HTTP at /mcp beside the chat.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from rag_bot.errors import EmptyQuestionError, NoIndexError, QuestionError, StoreError
from rag_bot.question import checked_question
from rag_bot.surfaces.access import Door
from rag_bot.text import clean_markup
from rag_bot.types import Certainty, Citation, Filters

if TYPE_CHECKING:
    from fastapi import FastAPI

    from rag_bot.interfaces import EngineView
    from rag_bot.settings import Settings

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "rag-bot answers questions about a collection of research-paper abstracts, with numbered citations. "
    "Use search_papers to find papers (ids, titles, scores), ask for a cited answer, get_paper for an abstract."
)
MAX_RESULTS = 100  # most papers search_papers returns
RESOURCE_PAGE = 500  # papers per resources/list page (a client pages on with the cursor)


class PaperHit(BaseModel):
    """One paper ranked for a question."""

    rank: int
    doc_id: str
    title: str
    score: float = Field(description="Fused ranking score (higher is better).")
    similarity: float = Field(description="Best cosine similarity of the paper's chunks to the question.")
    venue: str | None = None
    year: int | None = None
    authors: list[str] = Field(default_factory=list)
    source: str
    url: str | None = None


class SearchResult(BaseModel):
    """Papers ranked for a question, best first."""

    question: str
    papers: list[PaperHit]


class AskResult(BaseModel):
    """A cited answer (or a refusal when the collection does not cover the question)."""

    question: str
    mode: str
    answer: str = Field(description="The answer with [n] markers, followed by a References list.")
    grounded: bool = Field(description="False when rag-bot declined for lack of evidence (certainty none).")
    certainty: Certainty = Field(description="confident: the collection answers this; tentative: the closest papers "
                                 "may answer it (check them); none: nothing is close.")
    citations: list[Citation] = Field(description="The sources, each with grounding's probability that it belongs "
                                      "to the answer.")
    notice: str | None = None


class PaperDetail(BaseModel):
    """A paper's abstract and metadata."""

    doc_id: str
    title: str
    abstract: str
    source: str
    venue: str | None = None
    year: int | None = None
    authors: list[str] = Field(default_factory=list)
    url: str | None = None
    links: list[str] = Field(default_factory=list)



def _tool_error(exc: Exception) -> ToolError:
    if isinstance(exc, EmptyQuestionError):
        return ToolError("the question is empty")
    if isinstance(exc, QuestionError | NoIndexError | StoreError):
        return ToolError(str(exc))
    raise exc


def _year(year: str | int | None) -> str | None:
    # Agents send a year as a number as often as a string ("2026" or 2026); a range is a string ("2024-2026").
    return None if year is None else str(year)


class _PaperServer(MCPServer):
    """MCPServer whose resources/list names the collection's papers, a page at a time (the paper:// template
    alone would leave a client nothing to browse)."""

    engine: EngineView  # set by build_mcp

    async def _handle_list_resources(self, ctx: Any, params: Any) -> Any:
        from urllib.parse import quote

        from mcp.shared.exceptions import MCPError
        from mcp.types import INVALID_PARAMS, ListResourcesResult, Resource

        cursor = getattr(params, "cursor", None) or "0"
        if not cursor.isdigit():
            raise MCPError(code=INVALID_PARAMS, message=f"bad cursor {cursor!r}: pass back a nextCursor")
        papers = self.engine.papers
        start = int(cursor)
        ids = list(papers)[start:start + RESOURCE_PAGE]
        resources = [Resource(uri=f"paper://{quote(d, safe='')}", name=d, title=clean_markup(papers[d].title),
                              mime_type="text/markdown",
                              description=" · ".join(str(x) for x in (papers[d].venue, papers[d].year) if x) or None)
                     for d in ids]
        more = start + RESOURCE_PAGE < len(papers)
        return ListResourcesResult(resources=resources, next_cursor=str(start + RESOURCE_PAGE) if more else None)


def build_mcp(engine: EngineView) -> MCPServer:
    """The MCP server over an engine: its three tools, the paper resources and two prompts."""
    server = _PaperServer(name="rag-bot", instructions=INSTRUCTIONS, log_level="WARNING")
    server.engine = engine

    @server.tool(
        description="Rank the collection's papers for a question (hybrid dense + BM25 retrieval), best first: "
        "doc_id, title, score, venue, year. Filters, applied inside the search: venue (part of the name, any case), "
        "year (2026, or a range 2024-2026), author (part of an author's name), source (part of the file name)."
    )
    def search_papers(question: str, venue: str | None = None, year: str | int | None = None, author: str | None = None,
                      source: str | None = None, top_k: int = 10) -> SearchResult:
        try:
            question = checked_question(question)
        except QuestionError as exc:
            raise _tool_error(exc) from None
        top_k = max(1, min(int(top_k), MAX_RESULTS))
        try:
            filters = Filters.parse(venue=venue, year=_year(year), author=author, source=source)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        try:
            engine.require_index()
            hits = engine.retriever.retrieve_papers(question, top_k=top_k, filters=filters)
        except Exception as exc:
            raise _tool_error(exc) from exc
        from rag_bot.sanitize import markdown_safe, safe_url

        # Corpus text reaches agents and their users under the chat's rules (`rag_bot.sanitize`); ids pass as
        # they are (an agent sends them back).
        return SearchResult(question=markdown_safe(question), papers=[
            PaperHit(rank=i, doc_id=s.paper.doc_id, title=markdown_safe(s.paper.title), score=round(s.score, 6),
                     similarity=round(s.similarity, 4), venue=s.paper.venue and markdown_safe(s.paper.venue),
                     year=s.paper.year, authors=[markdown_safe(a) for a in s.paper.authors], source=s.paper.source,
                     url=safe_url(s.paper.url))
            for i, s in enumerate(hits, start=1)
        ])

    @server.tool(
        description="A cited answer from the collection: the text keeps [n] markers and ends with a References "
        "list; citations gives each source's doc_id, title and supporting quote. mode: auto (detected from the "
        "question), ask, summary (of the papers on a topic) or compare. certainty says how sure it is: confident "
        "(the collection answers this), tentative (the closest papers may: tell the user to check them), none "
        "(nothing is close: the answer says so instead of guessing; grounded is then false). Each citation's "
        "probability is how likely that paper belongs to the answer."
    )
    def ask(question: str, mode: Literal["auto", "ask", "summary", "compare"] = "auto", venue: str | None = None,
            year: str | int | None = None, author: str | None = None, source: str | None = None) -> AskResult:
        from rag_bot.sanitize import markdown_safe
        from rag_bot.surfaces.openai_format import references
        try:
            filters = Filters.parse(venue=venue, year=_year(year), author=author, source=source)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        try:
            answer = engine.ask(question, mode=None if mode == "auto" else mode, filters=filters)
        except Exception as exc:
            raise _tool_error(exc) from exc
        citations = [c.model_copy(update={"title": markdown_safe(c.title), "quote": markdown_safe(c.quote)})
                     for c in answer.citations]
        return AskResult(question=markdown_safe(answer.question), mode=answer.mode,
                         answer=markdown_safe(answer.answer + references(answer)), grounded=answer.grounded,
                         certainty=answer.certainty,
                         citations=citations, notice=answer.notice and markdown_safe(answer.notice))

    @server.tool(description="The abstract and metadata of one paper, by its doc_id (from search_papers or ask).")
    def get_paper(doc_id: str) -> PaperDetail:
        try:
            paper = engine.papers.get(doc_id.strip())
        except Exception as exc:
            raise _tool_error(exc) from exc
        if paper is None:
            raise ToolError(f"unknown doc_id {doc_id!r}: search_papers gives the ids of the collection's papers")
        from rag_bot.sanitize import markdown_safe, safe_url

        links = [url for url in map(safe_url, paper.links) if url]
        return PaperDetail(doc_id=paper.doc_id, title=markdown_safe(paper.title),
                           abstract=markdown_safe(clean_markup(paper.text)), source=paper.source,
                           venue=paper.venue and markdown_safe(paper.venue), year=paper.year,
                           authors=[markdown_safe(a) for a in paper.authors], url=safe_url(paper.url), links=links)

    @server.resource("paper://{doc_id}", name="paper", mime_type="text/markdown",
                     description="One paper of the collection: its title, metadata and abstract, by doc_id "
                     "(URL-encoded: a seed's 'x#3' is 'x%233').")
    def paper_resource(doc_id: str) -> str:
        from urllib.parse import unquote

        detail = get_paper(unquote(doc_id))
        meta = " · ".join(str(x) for x in (detail.venue, detail.year, ", ".join(detail.authors)) if x)
        return "\n\n".join(part for part in (f"# {detail.title}", meta, detail.abstract,
                                               f"doc_id: {detail.doc_id} · source: {detail.source}") if part)

    @server.prompt(name="summarize_area", description="A cited summary of what the collection says about a topic.")
    def summarize_area(topic: str) -> str:
        return (f"Summarize what the paper collection says about {topic}. Call the ask tool with mode 'summary' and "
                "the question 'Summarize the work on " + topic + "', then report its answer with the [n] markers "
                "and References as they are. If its certainty is tentative, say the papers may be related and should be "
                "checked; if none, say the collection does not cover the topic.")

    @server.prompt(name="compare_papers", description="A side-by-side comparison of papers of the collection.")
    def compare_papers(papers: str) -> str:
        return (f"Compare these papers of the collection: {papers}. Call the ask tool with mode 'compare' and the "
                f"question 'Compare {papers}', then give its table with the [n] markers and References as they are; "
                "read a paper in full with get_paper or the paper://<doc_id> resource when a cell is unclear.")

    return server


def mount_mcp(app: FastAPI, engine: EngineView, path: str = "/mcp", api_key: str | None = None,
              door: Door | None = None) -> FastAPI:
    """Serve the MCP tools over streamable HTTP at `path` of a FastAPI/Starlette app (before Gradio is mounted at
    "/"); its session manager runs in the app's lifespan. Requests pass `door` (default: the engine's settings,
    with `api_key` over RAG_BOT_API_KEY), as /v1's do."""
    from starlette.routing import Route

    server = build_mcp(engine)
    host = getattr(engine.settings, "host", "127.0.0.1")
    sub = server.streamable_http_app(streamable_http_path=path, host=host)
    door = door or Door.of(engine.settings, api_key=api_key)
    for route in sub.routes:
        if isinstance(route, Route):
            app.router.routes.append(Route(route.path, endpoint=door.guard(route.app)))
        else:
            app.router.routes.append(route)
    previous = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(parent: Any) -> AsyncIterator[Any]:
        async with server.session_manager.run(), previous(parent) as state:
            yield state

    app.router.lifespan_context = lifespan
    return app


def run_stdio(settings: Settings | None = None) -> None:
    """Serve the tools over standard input and output (what `rag-bot mcp` does)."""
    from rag_bot.engine import Engine

    engine = Engine(settings)
    engine.require_index()  # fail before the handshake, with a clear line on stderr
    engine.retriever  # load BM25 and names before the first call  # noqa: B018
    build_mcp(engine).run("stdio")
