"""The Chat tab's conversation: question box, chatbot, mode and papers, new chat / copy / export.

Every handler updates components by name: it returns (or yields) a dict {component: value}; components
left out stay as they are.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gradio as gr
from gradio.components import Component
from gradio.events import Dependency

from rag_bot.errors import EmptyQuestionError, NoIndexError, QuestionError, StoreError
from rag_bot.question import checked_question
from rag_bot.sanitize import safe_contract
from rag_bot.store.conversations import SavedTurn
from rag_bot.surfaces.ui.base import Library, Shared, owner_of
from rag_bot.surfaces.ui.render import (
    MODES,
    answer_html,
    answer_markdown,
    answer_message,
    chosen_mode,
    conversation_messages,
    example_prompts,
    export_markdown,
    markdown_text,
    permalink_html,
)
from rag_bot.surfaces.ui.sources import SourcesPanel
from rag_bot.text import mask_credentials
from rag_bot.types import Answer, Filters, Turn
from rag_bot.writing.references import Format, cited_papers, export

log = logging.getLogger(__name__)

# The copy button puts the last answer (with its references) on the clipboard in the browser.
COPY_JS = """(text) => {
  if (text && navigator.clipboard) { navigator.clipboard.writeText(text).catch(() => {}); }
  return text;
}"""
UNSAVED = "Conversations are not being saved (the conversations file cannot be used; see the log). Answers still work."
SORRY = "Sorry, something went wrong while answering ({}). Please try again."
# Seconds between two updates of a streamed answer (and from its first text to the first update): each update is
# a queue message, a diff of the chatbot and a render in the browser, so a fixed interval (not a fixed count)
# keeps the cost per answer bounded by the time it takes to write.
STREAM_EVERY = 0.15
# The reference downloads: (format, button label, elem_id, file name).
REFERENCE_FILES: tuple[tuple[Format, str, str, str], ...] = (
    ("bibtex", "BibTeX", "cite-bibtex", "rag-bot-references.bib"),
    ("ris", "RIS", "cite-ris", "rag-bot-references.ris"),
    ("csl", "CSL-JSON", "cite-csl", "rag-bot-references.json"),
)
MAX_PAPERS = 20  # the API's `papers` above this is taken as this (the slider stops at 10)


def check_question(text: object) -> str:
    """The question as the engine takes it (`rag_bot.question.checked_question`: one rule and one limit for every
    surface), or `gr.Error` saying what is wrong with it."""
    if not isinstance(text, str):
        raise gr.Error("The question must be text.")
    try:
        return checked_question(text)
    except EmptyQuestionError:
        raise gr.Error("Please type a question.") from None
    except QuestionError as exc:
        raise gr.Error(str(exc)) from None


def check_papers(value: str | float | None) -> int | None:
    """How many papers an answer may use: None (as many as it needs) for 0 or nothing, at most `MAX_PAPERS`;
    `gr.Error` for a negative or non-numeric value."""
    if value is None or value is False or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise gr.Error(f"papers must be a number, got {str(value)[:40]!r}.") from None
    if math.isnan(number) or number < 0:
        raise gr.Error("papers must be 0 (as many as the answer needs) or a positive number.")
    return int(min(number, MAX_PAPERS)) if number >= 1 else None  # float("inf") included


def check_filters(venue: object, year: object, author: object, source: object) -> Filters | None:
    """The chat's filter controls as `Filters` (None when all are empty); a gr.Error says what is wrong."""
    def text(value: object) -> str | None:
        return value.strip() or None if isinstance(value, str) else None

    try:
        return Filters.parse(venue=text(venue), year=text(year) if not isinstance(year, int) else year,
                             author=text(author), source=text(source))
    except ValueError as exc:
        raise gr.Error(str(exc)) from None


def _rewrite(path: Path, text: str) -> None:
    """Replace a file's text by writing a new file: a file truncated and rewritten in place is flushed to disk when
    it is closed (ext4's auto_da_alloc), which made each answer wait on the disk. Gradio serves the copy it took
    of the old file, so nothing reads this one meanwhile."""
    path.unlink(missing_ok=True)
    path.write_text(text, encoding="utf-8")


class ChatPanel:
    """Questions in, streamed cited answers out; the sources panel and the status line follow each answer."""

    def __init__(self, library: Library, sources: SourcesPanel, shared: Shared) -> None:
        self.library = library
        self.engine = library.engine
        self.sources = sources
        self.shared = shared
        self.export_dir = library.export_dir

    def render(self) -> None:
        settings = self.engine.settings
        self.last_answer = gr.Textbox(visible=False)
        self.chatbot = gr.Chatbot(
            elem_id="chat", height=520, buttons=["copy"], feedback_options=None,
            placeholder="Ask about the papers in the collection. Every claim is cited [n]; "
                        "click a number to see its source.",
        )
        with gr.Row():
            self.question = gr.Textbox(
                placeholder="Ask a question, e.g. “what does … achieve?”", show_label=False,
                scale=5, elem_id="question", submit_btn=False, max_lines=4,
            )
            self.send = gr.Button("Send", variant="primary", scale=1, elem_id="send")
        with gr.Row():
            self.mode = gr.Radio(list(MODES), value="Auto", label="Mode", elem_id="mode", scale=3)
            self.n_papers = gr.Slider(1, 10, value=settings.answer_papers, step=1,
                                      label="Papers to use", elem_id="papers", scale=2)
        cmap = self.library.map  # it holds every paper's venue and source: no paper is decoded for the choices
        with gr.Accordion("Filters", open=False, elem_id="filters"):
            with gr.Row():
                self.venue = gr.Dropdown(["", *sorted({v for v in cmap.venues if v})], value="",
                                         label="Venue", elem_id="filter-venue", allow_custom_value=True)
                self.year = gr.Textbox(label="Year or range", placeholder="2026, 2024-2026", elem_id="filter-year")
                self.author = gr.Textbox(label="Author (part of a name)", elem_id="filter-author")
                self.source = gr.Dropdown(["", *sorted(set(cmap.sources))], value="", label="Source file",
                                          elem_id="filter-source", allow_custom_value=True)
        with gr.Row():
            self.new = gr.Button("New chat", size="sm", elem_id="new-chat")
            self.copy = gr.Button("Copy answer", size="sm", elem_id="copy")
            self.export = gr.DownloadButton("Export as Markdown", size="sm", interactive=False, elem_id="export")
        # The cited papers of the whole conversation, as references to cite (enabled once an answer cites).
        with gr.Row(elem_id="cite-buttons"):
            self.cite = {fmt: gr.DownloadButton(f"References: {label}", size="sm", interactive=False, elem_id=elem)
                         for fmt, label, elem, _ in REFERENCE_FILES}
        # Examples as a Dataset (what gr.Examples makes), so a page built while the engine loads gets them later.
        examples = example_prompts(self.library.map, self.library.papers)
        self.examples = gr.Dataset(components=[self.question, self.mode], samples=examples or [["", "Auto"]],
                                   label="Examples from this collection", visible=bool(examples), type="values",
                                   elem_id="examples")

    def refreshed(self) -> tuple[Component, ...]:
        """The filter choices and the examples of the collection as it is now (the page built while the engine
        loaded shows them once it is ready)."""
        cmap = self.library.map
        examples = example_prompts(cmap, self.library.papers)
        return (gr.Dropdown(choices=["", *sorted({v for v in cmap.venues if v})]),
                gr.Dropdown(choices=["", *sorted(set(cmap.sources))]),
                gr.Dataset(samples=examples or [["", "Auto"]], visible=bool(examples)))

    def register_events(self) -> list[Dependency]:
        """Wire the chat; returns the events that end with an answer (for panels that follow answers)."""
        # A list, not a set: its order is the order of the /chat API's return values.
        # The conversation id is a State: the API neither takes nor returns it.
        # The reference buttons come before the export, so existing callers' `*_, export, last_answer` holds.
        outputs = [self.chatbot, self.question, self.sources.html, self.shared.turns, self.shared.status,
                   *self.cite.values(), self.export, self.last_answer, self.shared.conversation]
        inputs = [self.question, self.chatbot, self.shared.turns, self.mode, self.n_papers, self.venue, self.year,
                  self.author, self.source, self.shared.conversation]
        self.examples.click(lambda sample: (sample[0], sample[1]), [self.examples], [self.question, self.mode],
                            api_visibility="private")
        answered = [
            self.send.click(self.respond, inputs, outputs, api_name="chat"),
            self.question.submit(self.respond, inputs, outputs, api_visibility="private"),
        ]
        reset = [self.chatbot, self.shared.turns, self.sources.html, *self.cite.values(), self.export,
                 self.last_answer, self.shared.conversation]
        self.new.click(self.new_chat, None, reset, api_visibility="private")
        self.chatbot.clear(self.new_chat, None, reset, api_visibility="private")
        self.copy.click(self.copied, [self.last_answer], None, js=COPY_JS, api_visibility="private")
        gr.api(self.ask_api(), api_name="ask")
        return answered

    def respond(
        self, message: str, messages: list[object], turns: list[Turn], mode: str, n_papers: float,
        venue: str | None = None, year: str | None = None, author: str | None = None, source: str | None = None,
        conversation: str | None = None, request: gr.Request | None = None,
    ) -> Iterator[dict[Component, object]]:
        """Stream the answer into the chat, then save the turn, show its sources and update the status and
        export."""
        try:
            question = check_question(message or "")
            max_papers = check_papers(n_papers)
            filters = check_filters(venue, year, author, source)
        except gr.Error as exc:
            gr.Warning(exc.message)
            yield {self.chatbot: gr.skip()}
            return
        if not isinstance(messages, list) or not isinstance(turns, list) or not messages:
            messages, turns, conversation = [], [], None  # an emptied chat (or an API call without history) starts a new conversation
        turn = len(turns) + 1
        messages = [*messages, {"role": "user", "content": markdown_text(question)},
                    {"role": "assistant", "content": "…"}]
        yield {self.chatbot: messages, self.question: ""}
        log.debug("question %d (%s): %r", turn, mode, question)
        text = ""
        answer: Answer | None = None
        shown: float | None = None  # when the text was last shown (or first arrived)
        try:
            stream = self.engine.stream(question, mode=chosen_mode(mode), history=list(turns), max_papers=max_papers,
                                        filters=filters)
            for event in stream:
                if isinstance(event, Answer):
                    answer = event
                    continue
                text += event
                # Text is shown STREAM_EVERY seconds after it starts arriving, and then at most that often: each
                # update is a queue message, a diff sent to the browser and a render. A text written at once (the
                # offline writer's) is all there by then and arrives with the final update, in one piece.
                now = time.monotonic()
                if shown is None:
                    shown = now
                elif now - shown >= STREAM_EVERY:
                    messages[-1] = {"role": "assistant", "content": answer_html(text, turn)}
                    yield {self.chatbot: messages}
                    shown = time.monotonic()
        except (QuestionError, NoIndexError, StoreError) as exc:  # the user can act on these: shown as they are
            gr.Warning(mask_credentials(str(exc)))
            messages[-1] = {"role": "assistant", "content": markdown_text(str(exc))}
            yield {self.chatbot: messages}
            return
        except Exception as exc:  # the chat never shows a traceback; the log has it
            log.exception("error answering question %d", turn)
            gr.Warning(SORRY.format(type(exc).__name__))
            yield {self.chatbot: messages[:-2], self.question: question}
            return
        if answer is None:
            return
        log.info("answer %d: %s by %s, %d sources, %s ms", turn, answer.mode, answer.llm, len(answer.citations),
                 answer.timings_ms.get("total"))
        conversation, link = self.save(conversation, question, answer, request)
        messages[-1] = {"role": "assistant", "content": answer_message(answer, turn) + permalink_html(link)}
        turns = [*turns, Turn(question=question, answer=answer)]
        saved = {self.shared.conversation: conversation} if self.shared.conversation is not None else {}
        yield saved | {
            self.chatbot: messages,
            self.sources.html: self.sources.show(turns),
            self.shared.turns: turns,
            self.shared.status: self.library.status(answer),
            self.last_answer: answer_markdown(answer),
        } | self.download_buttons(turns, request)

    def save(self, conversation: str | None, question: str, answer: Answer,
             request: gr.Request | None) -> tuple[str | None, str | None]:
        """Save a turn to the session's conversation (a new one for the first turn, or when it was deleted
        meanwhile): (conversation id, permalink token), (None, None) when saving is off (said once a session)."""
        store = self.library.conversations
        owner = owner_of(request)
        link = store.append(conversation, owner, question, answer) if conversation else None
        if link is None and store.ok:
            conversation = store.create(owner, question)
            link = store.append(conversation, owner, question, answer) if conversation else None
        if link is None:
            session = str(getattr(request, "session_hash", None) or "")
            if not store.ok and session not in self.library.warned_unsaved:
                self.library.warned_unsaved.add(session)
                gr.Warning(UNSAVED)
            return None, None
        return conversation, link

    def show_saved(self, conversation: str | None, saved: list[SavedTurn],
                   request: gr.Request | None = None) -> dict[Component, object]:
        """The chat showing a saved conversation (as its answers were shown live), or a new chat when empty."""
        if not saved or not conversation:
            return self.new_chat()
        turns = [s.turn for s in saved]
        answers = [t.answer for t in turns if t.answer is not None]
        return {
            self.chatbot: conversation_messages(turns, [s.link for s in saved]),
            self.shared.turns: turns,
            self.shared.conversation: conversation,
            self.sources.html: self.sources.show(turns),
            self.last_answer: answer_markdown(answers[-1]) if answers else "",
        } | self.download_buttons(turns, request)

    def session_folder(self, request: gr.Request | None) -> Path:
        """The browser session's folder in the app's export folder (removed at exit)."""
        session = re.sub(r"[^A-Za-z0-9_-]", "", str(getattr(request, "session_hash", None) or ""))[:64] or "local"
        folder = self.export_dir / session
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def write_export(self, turns: list[Turn], request: gr.Request | None = None) -> Path:
        """The conversation as a Markdown file to download: one file per browser session, overwritten by
        each answer."""
        path = self.session_folder(request) / "rag-bot-conversation.md"
        _rewrite(path, export_markdown(turns, self.library.papers))
        return path

    def write_references(self, turns: list[Turn], request: gr.Request | None = None) -> dict[Format, Path]:
        """The papers the conversation's answers cite, as BibTeX, RIS and CSL-JSON files in the session's
        folder ({} when no answer cites a paper). A file is rewritten only when its text changes (a follow-up
        citing the same papers leaves them as they are, and Gradio's cached copy stands)."""
        papers = cited_papers([t.answer for t in turns if t.answer is not None], self.library.papers)
        if not papers:
            return {}
        folder = self.session_folder(request)
        paths: dict[Format, Path] = {}
        for fmt, _, _, name in REFERENCE_FILES:
            path = folder / name
            text = export(papers, fmt)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                _rewrite(path, text)
            paths[fmt] = path
        return paths

    def download_buttons(self, turns: list[Turn], request: gr.Request | None = None) -> dict[Component, object]:
        """The downloads of a conversation: its Markdown export, and its references (disabled when nothing is
        cited). Updates (`gr.update`), not new components: Gradio builds the component from an update once."""
        export = str(self.write_export(turns, request))
        paths = self.write_references(turns, request)
        return {self.export: gr.update(value=export, interactive=True)} | {
            button: gr.update(value=str(paths[fmt]), interactive=True) if fmt in paths
            else gr.update(value=None, interactive=False) for fmt, button in self.cite.items()}

    def new_chat(self) -> dict[Component, object]:
        # The question box is left alone: the user may already be typing the next question.
        return {
            self.chatbot: [],
            self.shared.turns: [],
            self.sources.html: self.sources.empty(),
            self.export: gr.update(value=None, interactive=False),
            **{button: gr.update(value=None, interactive=False) for button in self.cite.values()},
            self.last_answer: "",
            **({self.shared.conversation: None} if self.shared.conversation is not None else {}),
        }

    @staticmethod
    def copied(text: str) -> None:
        if text:
            gr.Info("Answer copied to the clipboard.")
        else:
            gr.Warning("No answer to copy yet.")

    def ask_api(self) -> Callable[..., dict[str, object]]:
        library = self.library

        def ask(question: str, mode: str = "Auto", papers: int = 0, venue: str = "", year: str = "",
                author: str = "", source: str = "") -> dict[str, object]:
            """The JSON contract of `rag-bot ask --json` for one question (mode: Auto, Ask, Summarize an area,
            Compare, or ask/summary/compare; anything else: Auto), optionally limited by venue, year (2026 or
            2024-2026), author and source."""
            text = check_question(question)
            filters = check_filters(venue, year, author, source)
            max_papers = check_papers(papers)
            try:
                answer = library.engine.ask(text, mode=chosen_mode(mode if isinstance(mode, str) else None),
                                            max_papers=max_papers, filters=filters)
            except (QuestionError, NoIndexError, StoreError) as exc:
                raise gr.Error(mask_credentials(str(exc))) from None
            except Exception as exc:  # the caller gets one line; the log has the traceback
                log.exception("error answering an /ask question")
                raise gr.Error(SORRY.format(type(exc).__name__)) from None
            result: dict[str, object] = safe_contract(answer.to_json())  # a client may render it: the shared rules
            return result

        return ask
