"""The Gradio chat: a thin surface over `Engine` (no retrieval or prompting logic here).

Three tabs: Chat (streamed, cited answers with a sources panel), Collection (browse, search, upload) and
Map (the collection in 2-D by topic). Everything from the collection or the user is HTML-escaped before
our own markup (links, <mark>) is added, so an abstract holding `<script>` shows as text.
"""

from __future__ import annotations

import html
import os
import re
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rag_bot.collection_map import CollectionMap, build_map
from rag_bot.corpus import SUFFIXES, ReadResult
from rag_bot.engine import Engine
from rag_bot.errors import EmptyQuestionError, NoIndexError
from rag_bot.index import store_label
from rag_bot.settings import Settings
from rag_bot.text import clean_markup, split_sentences
from rag_bot.types import Answer, Paper, Turn

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from a local tool

MODES: dict[str, Any] = {"Auto": None, "Ask": "ask", "Summarize an area": "summary", "Compare": "compare"}
MODE_NAMES = {"ask": "Ask", "summary": "Summarize an area", "compare": "Compare"}
_CITE = re.compile(r"\[(\d+)\]")

CSS = """
.status-line { font-size: 0.9em; opacity: 0.85; }
.sources-panel { max-height: 72vh; overflow-y: auto; }
.src-card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px;
            margin: 6px 0; scroll-margin: 12px; }
.src-card.flash { animation: src-flash 1.6s ease-out; }
@keyframes src-flash { from { background: #fff3b0; } to { background: transparent; } }
.src-n { font-weight: 700; margin-right: 4px; }
.src-title { font-weight: 600; }
.src-meta { font-size: 0.85em; opacity: 0.8; margin: 2px 0 4px; }
.src-abstract { font-size: 0.9em; line-height: 1.45; }
.src-abstract mark { background: #ffe58a; color: inherit; padding: 0 1px; }
a.cite { text-decoration: none; font-weight: 600; }
.turn-sources > summary { cursor: pointer; font-weight: 600; margin-top: 6px; }
"""

# A click on an inline [n] scrolls to (and flashes) its source card, opening the answer's section first.
HEAD = """
<script>
document.addEventListener("click", function (event) {
  var link = event.target && event.target.closest ? event.target.closest('a[href^="#src-"]') : null;
  if (!link) { return; }
  event.preventDefault();
  event.stopPropagation();
  var card = document.getElementById(link.getAttribute("href").slice(1));
  if (!card) { return; }
  var section = card.closest("details");
  if (section) { section.open = true; }
  card.scrollIntoView({behavior: "smooth", block: "nearest"});
  card.classList.remove("flash"); void card.offsetWidth; card.classList.add("flash");
}, true);
</script>
"""

_COPY_JS = """(text) => {
  if (text && navigator.clipboard) { navigator.clipboard.writeText(text).catch(() => {}); }
  return text;
}"""


# --- rendering (pure functions, tested directly) -------------------------------------------------------


def answer_html(text: str, turn: int) -> str:
    """Answer Markdown made safe for the chat: HTML escaped, each [n] a link to card n of this turn."""
    safe = html.escape(text, quote=False)
    return _CITE.sub(lambda m: f'<a class="cite" href="#src-{turn}-{m.group(1)}">[{m.group(1)}]</a>', safe)


def highlight_quote(abstract: str, quote: str) -> str:
    """The abstract as escaped HTML with the quoted sentence in <mark> (best-overlapping sentence if the
    quote is not found verbatim)."""
    text = clean_markup(abstract)
    quote = quote.strip().rstrip("…").strip()
    start = text.find(quote) if quote else -1
    if start < 0 and quote:
        words = set(re.findall(r"\w+", quote.lower()))
        best, best_overlap = "", 0.0
        for sentence in split_sentences(text):
            overlap = len(words & set(re.findall(r"\w+", sentence.lower()))) / max(len(words), 1)
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
        if best and best_overlap >= 0.5:
            quote, start = best, text.find(best)
    if start < 0:
        return html.escape(text)
    end = start + len(quote)
    return f"{html.escape(text[:start])}<mark>{html.escape(text[start:end])}</mark>{html.escape(text[end:])}"


def safe_url(url: str | None) -> str | None:
    """A link only if it is http(s): a `javascript:` URL in a record must not become a link."""
    return url if url and re.match(r"https?://", url, re.IGNORECASE) else None


def paper_place(paper: Paper | None, doc_id: str, source: str) -> str:
    """Where a paper is: its source file and id, venue and year when known."""
    parts = [source, doc_id]
    if paper is not None and (paper.venue or paper.year):
        parts.append(" ".join(str(x) for x in (paper.venue, paper.year) if x))
    return " · ".join(parts)


def source_cards(answer: Answer, papers: dict[str, Paper], turn: int) -> str:
    """The cited papers of one answer as cards with ids `src-<turn>-<n>`."""
    cards = []
    for c in answer.citations:
        paper = papers.get(c.doc_id)
        url = safe_url((paper.url or (paper.links[0] if paper.links else None)) if paper else None)
        link = f' · <a href="{html.escape(url)}" target="_blank" rel="noopener noreferrer">link</a>' if url else ""
        abstract = highlight_quote(paper.text, c.quote) if paper else f"<mark>{html.escape(c.quote)}</mark>"
        cards.append(
            f'<div class="src-card" id="src-{turn}-{c.n}">'
            f'<div><span class="src-n">[{c.n}]</span><span class="src-title">{html.escape(clean_markup(c.title))}'
            f"</span></div>"
            f'<div class="src-meta">{html.escape(paper_place(paper, c.doc_id, c.source))}{link}</div>'
            f'<div class="src-abstract">{abstract}</div></div>'
        )
    return "".join(cards)


def sources_panel(turns: Sequence[Turn], papers: dict[str, Paper]) -> str:
    """The sources of every answer so far, the latest first and open."""
    sections = []
    for t in range(len(turns), 0, -1):
        answer = turns[t - 1].answer
        if answer is None:
            continue
        body = source_cards(answer, papers, t) if answer.citations else "<p>No sources: nothing in the collection matched.</p>"
        question = html.escape(turns[t - 1].question)
        sections.append(
            f'<details class="turn-sources"{" open" if t == len(turns) else ""}>'
            f"<summary>Answer {t}: {question}</summary>{body}</details>"
        )
    if not sections:
        return '<div class="sources-panel"><p>Sources of the answers appear here. Click a [n] in an answer to ' \
               "jump to its source.</p></div>"
    return f'<div class="sources-panel">{"".join(sections)}</div>'


def export_markdown(turns: Sequence[Turn], papers: dict[str, Paper]) -> str:
    """The conversation as Markdown: each question, its answer and its references."""
    out = ["# rag-bot conversation", ""]
    for t, turn in enumerate(turns, start=1):
        out += [f"## {t}. {turn.question}", ""]
        if turn.answer is None:
            continue
        out += [turn.answer.answer, ""]
        if turn.answer.notice:
            out += [f"_{turn.answer.notice}_", ""]
        if turn.answer.citations:
            out += ["**References**", ""]
            for c in turn.answer.citations:
                paper = papers.get(c.doc_id)
                url = (paper.url or (paper.links[0] if paper.links else None)) if paper else None
                place = paper_place(paper, c.doc_id, c.source)
                out.append(f"{c.n}. {clean_markup(c.title)} ({place}){' ' + url if url else ''}")
                out.append(f"   > {c.quote}")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def answer_markdown(answer: Answer) -> str:
    """One answer with its references, as copied to the clipboard."""
    lines = [answer.answer]
    if answer.citations:
        lines += ["", "References:"]
        lines += [f"[{c.n}] {clean_markup(c.title)} ({c.source}, {c.doc_id})" for c in answer.citations]
    return "\n".join(lines)


def engine_label(settings: Settings, answer: Answer | None = None) -> str:
    """Which engine writes the answers: the model of the last answer, else what the settings choose."""
    if answer is not None:
        return "offline composer" if answer.llm == "offline" else answer.llm
    if settings.llm == "offline" or (
        settings.llm == "auto" and not (settings.openai_api_key or settings.openai_base_url)
    ):
        return "offline composer"
    if settings.llm == "local":
        return settings.gguf.name if settings.gguf else "local model"
    return settings.llm_model


def status_line(settings: Settings, papers: int, answer: Answer | None = None) -> str:
    """Engine, collection size and store, for the top of the page."""
    return (
        f"Answers by **{html.escape(engine_label(settings, answer))}** · **{papers}** papers indexed · "
        f"store: {html.escape(store_label(settings))}"
    )


def example_prompts(cmap: CollectionMap, papers: dict[str, Paper]) -> list[list[str]]:
    """One example question per mode, made from the collection: names of its papers and its topics."""
    if len(cmap) == 0:
        return []

    def name(i: int) -> str | None:
        paper = papers.get(cmap.doc_ids[i])
        return paper.aliases[0] if paper and paper.aliases and len(paper.aliases[0]) <= 24 else None

    examples: list[list[str]] = []
    clusters = sorted(set(int(c) for c in cmap.clusters))
    biggest = cmap.members(clusters[0])
    named = [i for i in biggest if name(i)] or [i for i in range(len(cmap)) if name(i)]
    if named:
        examples.append([f"What does {name(named[0])} do, and what does it achieve?", "Ask"])
    terms = cmap.terms[clusters[0]] if cmap.terms else []
    if terms:
        examples.append([f"Summarize the work on {' and '.join(terms[:2])}", "Summarize an area"])
    # Two named papers of the same topic make the most telling comparison.
    for j in clusters:
        pair = [i for i in cmap.members(j) if name(i)][:2]
        if len(pair) == 2:
            examples.append([f"Compare {name(pair[0])} and {name(pair[1])}", "Compare"])
            break
    if len(clusters) > 1 and cmap.terms[clusters[1]]:
        examples.append([f"Which papers study {cmap.terms[clusters[1]][0]}?", "Auto"])
    return examples


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


def check_upload(path: Path, max_mb: int) -> str | None:
    """Why an uploaded file is refused (type or size), or None."""
    name = path.name.lower()
    if not any(name.endswith(s) for s in SUFFIXES):
        return f"not a corpus file type (accepted: {', '.join(SUFFIXES)})"
    size = path.stat().st_size
    if size > max_mb * 1024 * 1024:
        return f"{size / 1024 / 1024:.1f} MB is over the {max_mb} MB limit"
    if size == 0:
        return "empty file"
    return None


def ensure_index(engine: Engine) -> None:
    """Index the seeds folder when the store is empty (first `make run`)."""
    if engine.index.count() > 0:
        return
    from tqdm import tqdm

    print(f"No index yet: indexing {engine.settings.seeds} ...", file=sys.stderr)
    bar: Any = None

    def on_read(result: Any) -> None:
        nonlocal bar
        for problem in result.problems:
            print(f"warning: {problem}", file=sys.stderr)
        bar = tqdm(total=len(result.papers), unit="paper", desc="Indexing", file=sys.stderr)

    engine.ingest([engine.settings.seeds], progress=lambda n: bar.update(n), on_read=on_read)
    if bar is not None:
        bar.close()


# --- the app ---------------------------------------------------------------------------------------------


class _Collection:
    """What the page shows of the collection (papers, map), rebuilt after an upload."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # Answers and ingests share the engine; an ingest rebuilds the retriever, so it runs alone.
        self.lock = threading.Lock()
        self.refresh()

    def refresh(self) -> None:
        """Take the papers the retriever holds (re-read by every ingest) and recompute the map."""
        self.papers = dict(self.engine.retriever.papers)
        papers = list(self.papers.values())
        vectors = self.engine.index.paper_vectors([p.doc_id for p in papers]) if papers else {}
        self.map = build_map(papers, vectors)


def paper_table(papers: dict[str, Paper], query: str = "") -> Any:
    """The papers (title, source, id, venue/year) whose fields or abstract contain every word of the query."""
    import pandas as pd

    words = query.lower().split()
    rows = []
    for p in sorted(papers.values(), key=lambda p: (p.source, p.doc_id)):
        title = clean_markup(p.title)
        if words:
            hay = f"{title} {p.source} {p.doc_id} {p.venue or ''} {p.year or ''} {p.text}".lower()
            if not all(w in hay for w in words):
                continue
        venue = " ".join(str(x) for x in (p.venue, p.year) if x)
        rows.append([title, p.source, p.doc_id, venue])
    return pd.DataFrame(rows, columns=["Title", "Source", "ID", "Venue / year"])


def map_frame(cmap: CollectionMap, cited: Sequence[str] = ()) -> Any:
    """The map's points as a DataFrame (x, y, topic, title, id, source)."""
    import pandas as pd

    return pd.DataFrame(cmap.rows(cited), columns=["x", "y", "topic", "title", "id", "source"])


def map_plot(cmap: CollectionMap, cited: Sequence[str] = ()) -> Any:
    """The ScatterPlot update for the map (the last answer's sources as their own ★ series)."""
    import gradio as gr

    return gr.ScatterPlot(value=map_frame(cmap, cited))


def build_app(engine: Engine) -> Any:
    """The chat page on an engine."""
    import gradio as gr

    settings = engine.settings
    collection = _Collection(engine)
    export_dir = Path(tempfile.mkdtemp(prefix="rag-bot-export-"))

    def cited_ids(turns: Sequence[Turn]) -> list[str]:
        last = turns[-1].answer if turns else None
        return [c.doc_id for c in last.citations] if last else []

    def respond(message: str, messages: list[Any], turns: list[Turn], mode: str, n_papers: float) -> Iterator[Any]:
        """Stream the answer into the chat, then show its sources and update the status and export."""
        question = " ".join((message or "").split())
        if not question:
            gr.Warning("Please type a question.")
            yield gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        if not messages:
            turns = []  # an emptied chat (or an API call without history) starts a new conversation
        turn = len(turns) + 1
        messages = [*messages, {"role": "user", "content": html.escape(question)},
                    {"role": "assistant", "content": "…"}]
        yield messages, "", gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        text = ""
        answer: Answer | None = None
        try:
            with collection.lock:
                stream = engine.stream(question, mode=MODES.get(mode), history=list(turns),
                                       max_papers=int(n_papers) if n_papers else None)
                for event in stream:
                    if isinstance(event, Answer):
                        answer = event
                    else:
                        text += event
                        messages[-1] = {"role": "assistant", "content": answer_html(text, turn)}
                        yield messages, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        except (EmptyQuestionError, NoIndexError) as exc:
            gr.Warning(str(exc))
            messages[-1] = {"role": "assistant", "content": html.escape(str(exc))}
            yield messages, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        except Exception as exc:  # the chat never shows a traceback
            print(f"error answering {question!r}: {exc!r}", file=sys.stderr)
            gr.Warning(f"Sorry, something went wrong while answering ({type(exc).__name__}). Please try again.")
            yield messages[:-2], question, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        if answer is None:
            return
        content = answer_html(answer.answer, turn)
        if answer.notice:
            content += f"\n\n<em>{html.escape(answer.notice)}</em>"
        messages[-1] = {"role": "assistant", "content": content}
        turns = [*turns, Turn(question=question, answer=answer)]
        path = export_dir / f"rag-bot-conversation-{uuid.uuid4().hex[:8]}.md"
        path.write_text(export_markdown(turns, collection.papers), encoding="utf-8")
        yield (
            messages,
            gr.skip(),
            sources_panel(turns, collection.papers),
            turns,
            status_line(settings, len(collection.papers), answer),
            gr.DownloadButton(value=str(path), interactive=True),
            answer_markdown(answer),
        )

    def new_chat() -> tuple[Any, ...]:
        # The question box is left alone: the user may already be typing the next question.
        return [], [], sources_panel([], {}), gr.DownloadButton(value=None, interactive=False), ""

    def copied(text: str) -> None:
        if text:
            gr.Info("Answer copied to the clipboard.")
        else:
            gr.Warning("No answer to copy yet.")

    def add_files(files: list[str] | None, progress: gr.Progress = gr.Progress()) -> tuple[Any, ...]:  # noqa: B008
        """Check and index uploaded files; report what was added, skipped and rejected."""
        if not files:
            raise gr.Error("Choose one or more files first (.txt, .jsonl, .jsonl.gz or .csv).")
        accepted: list[Path] = []
        rejected: list[str] = []
        for name in files:
            path = Path(name)
            why = check_upload(path, settings.max_upload_mb)
            if why:
                rejected.append(f"{path.name}: {why}")
            else:
                accepted.append(path)
        total = 0
        done = 0

        def on_read(result: ReadResult) -> None:
            nonlocal total
            total = len(result.papers)
            progress(0, desc=f"Indexing {total} papers")

        def on_progress(n: int) -> None:
            nonlocal done
            done += n
            progress(done / max(total, 1), desc=f"Indexed {done} of {total} papers")

        start = time.perf_counter()
        report = None
        if accepted:
            try:
                with collection.lock:
                    report, result = engine.ingest(accepted, progress=on_progress, on_read=on_read)
                    collection.refresh()
            except Exception as exc:
                print(f"error ingesting {[p.name for p in accepted]}: {exc!r}", file=sys.stderr)
                raise gr.Error(f"Could not index the files ({type(exc).__name__}: {exc}).") from None
            for problem in result.problems:
                where = f"{Path(problem.path).name}:{problem.line}" if problem.line else Path(problem.path).name
                rejected.append(f"{where}: {problem.message}")
        seconds = time.perf_counter() - start
        lines = []
        if report is not None:
            lines.append(
                f"**{report.added} added**, {report.updated} updated, {report.unchanged} skipped "
                f"(already indexed, unchanged) from {len(accepted)} file(s) in {seconds:.1f} s. "
                f"The collection now holds {len(collection.papers)} papers; new papers are answerable now."
            )
            gr.Info(f"{report.added} papers added, {report.updated} updated.")
        if rejected:
            lines.append(f"**{len(rejected)} rejected:**")
            lines += [f"- {html.escape(r, quote=False)}" for r in rejected[:50]]
            if len(rejected) > 50:
                lines.append(f"- … and {len(rejected) - 50} more")
            if report is None:
                gr.Warning("No file could be added; see the summary.")
        return (
            "\n".join(lines),
            paper_table(collection.papers),
            status_line(settings, len(collection.papers)),
            None,
        )

    def search(query: str) -> Any:
        return paper_table(collection.papers, query or "")

    def show_map(turns: list[Turn]) -> Any:
        return map_plot(collection.map, cited_ids(turns))

    def map_legend() -> str:
        cmap = collection.map
        counts = [len(cmap.members(j)) for j in range(len(cmap.labels))]
        return "Topics (k-means on the abstract embeddings, named by their distinctive terms): " + "; ".join(
            f"**{html.escape(label)}** ({count})" for label, count in zip(cmap.labels, counts)
        )

    examples = example_prompts(collection.map, collection.papers)
    with gr.Blocks(title="rag-bot", analytics_enabled=False, fill_width=True) as app:
        gr.Markdown("## rag-bot · cited answers about research abstracts")
        status = gr.Markdown(status_line(settings, len(collection.papers)), elem_classes="status-line",
                             elem_id="status")
        turns_state = gr.State([])
        last_answer = gr.Textbox(visible=False)
        with gr.Tabs():
            with gr.Tab("Chat", id="chat"):
                with gr.Row():
                    with gr.Column(scale=3):
                        chatbot = gr.Chatbot(
                            elem_id="chat", height=520, buttons=["copy"], feedback_options=None,
                            placeholder="Ask about the papers in the collection. Every claim is cited [n]; "
                                        "click a number to see its source.",
                        )
                        with gr.Row():
                            question = gr.Textbox(
                                placeholder="Ask a question, e.g. “what does … achieve?”", show_label=False,
                                scale=5, elem_id="question", submit_btn=False, max_lines=4,
                            )
                            send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
                        with gr.Row():
                            mode = gr.Radio(list(MODES), value="Auto", label="Mode", elem_id="mode", scale=3)
                            n_papers = gr.Slider(1, 10, value=settings.answer_papers, step=1,
                                                 label="Papers to use", elem_id="papers", scale=2)
                        with gr.Row():
                            new = gr.Button("New chat", size="sm", elem_id="new-chat")
                            copy = gr.Button("Copy answer", size="sm", elem_id="copy")
                            export = gr.DownloadButton("Export as Markdown", size="sm", interactive=False,
                                                       elem_id="export")
                        if examples:
                            gr.Examples(examples, inputs=[question, mode], label="Examples from this collection")
                    with gr.Column(scale=2):
                        gr.Markdown("### Sources")
                        sources = gr.HTML(sources_panel([], {}), elem_id="sources")
            with gr.Tab("Collection", id="collection"):
                with gr.Row():
                    query = gr.Textbox(placeholder="Search titles, ids, sources and abstracts", show_label=False,
                                       elem_id="search", scale=4)
                    search_btn = gr.Button("Search", scale=1, elem_id="search-btn")
                table = gr.Dataframe(paper_table(collection.papers), interactive=False, wrap=True,
                                     elem_id="papers-table", max_height=420)
                gr.Markdown(
                    f"**Add papers**: seed `.txt` files (header line, abstracts separated by blank lines), "
                    f"`.jsonl` / `.jsonl.gz` or `.csv` with `id,title,abstract` and optional "
                    f"`venue,year,authors,url`; up to {settings.max_upload_mb} MB per file."
                )
                files = gr.File(file_count="multiple", file_types=[".txt", ".jsonl", ".gz", ".csv"],
                                label="Corpus files", elem_id="upload")
                add = gr.Button("Add to the collection", variant="primary", elem_id="add")
                summary = gr.Markdown(elem_id="upload-summary")
            with gr.Tab("Map", id="map") as map_tab:
                legend = gr.Markdown(map_legend())
                plot = gr.ScatterPlot(
                    map_frame(collection.map), x="x", y="y", color="topic",
                    tooltip=["title", "topic", "id"], x_title="component 1", y_title="component 2",
                    elem_id="map", label="Papers by topic (the last answer's sources: ★)",
                )

        outputs = [chatbot, question, sources, turns_state, status, export, last_answer]
        chat_inputs = [question, chatbot, turns_state, mode, n_papers]
        # The map follows each answer, so its highlights are current whenever the tab is opened.
        send.click(respond, chat_inputs, outputs, api_name="chat").then(
            show_map, [turns_state], [plot], api_visibility="private"
        )
        question.submit(respond, chat_inputs, outputs, api_visibility="private").then(
            show_map, [turns_state], [plot], api_visibility="private"
        )
        reset = [chatbot, turns_state, sources, export, last_answer]
        new.click(new_chat, None, reset, api_visibility="private")
        chatbot.clear(new_chat, None, reset, api_visibility="private")
        copy.click(copied, [last_answer], None, js=_COPY_JS, api_visibility="private")
        add.click(add_files, [files], [summary, table, status, files], api_name="upload").then(
            lambda: map_legend(), None, legend, api_visibility="private"
        )
        search_btn.click(search, [query], [table], api_name="search")
        query.submit(search, [query], [table], api_visibility="private")
        map_tab.select(show_map, [turns_state], [plot], api_visibility="private")
        gr.api(_ask_api(engine, collection), api_name="ask")
    return app


def _ask_api(engine: Engine, collection: _Collection) -> Any:
    def ask(question: str, mode: str = "Auto", papers: int = 0) -> dict[str, Any]:
        """The JSON contract of `rag-bot ask --json` for one question (mode: Auto, Ask, Summarize an area,
        Compare, or ask/summary/compare)."""
        import gradio as gr

        chosen = MODES.get(mode, mode if mode in MODE_NAMES else None)
        try:
            with collection.lock:
                answer = engine.ask(question, mode=chosen, max_papers=papers or None)
        except (EmptyQuestionError, NoIndexError) as exc:
            raise gr.Error(str(exc)) from None
        return answer.to_json()

    return ask


def serve(settings: Settings | None = None) -> None:
    """Index the seeds if needed, then serve the chat at http://host:port."""
    engine = Engine(settings)
    try:
        auth = auth_pairs(engine.settings.auth)
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    ensure_index(engine)
    engine.retriever  # load BM25 and names before the first question  # noqa: B018
    app = build_app(engine)
    print(f"rag-bot chat on http://{engine.settings.host}:{engine.settings.port}"
          f"{' (login required)' if auth else ''}", file=sys.stderr)
    app.queue(default_concurrency_limit=1).launch(
        server_name=engine.settings.host,
        server_port=engine.settings.port,
        show_error=False,
        auth=auth,
        auth_message="rag-bot: log in with the user and password from RAG_BOT_AUTH." if auth else None,
        max_file_size=f"{engine.settings.max_upload_mb}mb",
        css=CSS,
        head=HEAD,
        footer_links=["api"],
    )


__all__ = ["MODES", "build_app", "ensure_index", "serve"]
