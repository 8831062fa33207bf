"""The Gradio chat page: a thin surface over `Engine` (no retrieval or prompting logic here)."""

from __future__ import annotations

import html
import os
import sys
from typing import Any

from rag_bot.engine import Engine
from rag_bot.errors import EmptyQuestionError, NoIndexError
from rag_bot.index import store_label
from rag_bot.settings import Settings
from rag_bot.types import Answer

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from a local tool

MODES = {"Auto": None, "Ask": "ask", "Summarize an area": "summary", "Compare": "compare"}


def render_answer(answer: Answer) -> str:
    """An answer as chat Markdown: the text, then its numbered sources with the quoted sentence."""
    parts = [answer.answer]
    if answer.citations:
        lines = ["**Sources**"]
        for c in answer.citations:
            lines.append(f"{c.n}. **{html.escape(c.title)}** · {html.escape(c.source)} · `{c.doc_id}`  \n"
                         f"   > {html.escape(c.quote)}")
        parts.append("\n".join(lines))
    if answer.notice:
        parts.append(f"_{html.escape(answer.notice)}_")
    return "\n\n".join(parts)


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


def build_app(engine: Engine) -> Any:
    """The chat page on an engine."""
    import gradio as gr

    def respond(message: str, history: list[Any], mode: str) -> str:
        try:
            return render_answer(engine.ask(message, mode=MODES.get(mode)))  # type: ignore[arg-type]
        except EmptyQuestionError:
            return "Please type a question."
        except NoIndexError as exc:
            return str(exc)
        except Exception as exc:  # the chat never shows a traceback
            print(f"error answering {message!r}: {exc!r}", file=sys.stderr)
            return f"Sorry, something went wrong while answering ({type(exc).__name__}). Please try again."

    count = engine.index.count()
    description = (
        f"Ask about {count} indexed abstracts; every claim is cited. "
        f"Answers by the offline composer · store: {html.escape(store_label(engine.settings))}"
    )
    mode = gr.Radio(list(MODES), value="Auto", label="Mode")
    return gr.ChatInterface(
        respond,
        additional_inputs=[mode],
        title="rag-bot",
        description=description,
        examples=[
            ["What does the collection say about sparse autoencoders?", "Auto"],
            ["Summarize the work on making LLM inference cheaper", "Auto"],
            ["Compare CorrSteer and SARSteer", "Auto"],
        ],
        api_name="chat",
        fill_height=True,
    )


def serve(settings: Settings | None = None) -> None:
    """Index the seeds if needed, then serve the chat at http://host:port."""
    engine = Engine(settings)
    ensure_index(engine)
    engine.retriever  # load BM25 and names before the first question  # noqa: B018
    app = build_app(engine)
    print(f"rag-bot chat on http://{engine.settings.host}:{engine.settings.port}", file=sys.stderr)
    app.launch(server_name=engine.settings.host, server_port=engine.settings.port, show_error=False)
