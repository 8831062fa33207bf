"""The read-only page of one saved answer (`/answer/<token>`): its question, certainty, notice and references escaped,
its Markdown rendered without raw HTML, images or unsafe links (corpus text, model text and questions are
untrusted)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from rag_bot import answer_words as words
from rag_bot.sanitize import markdown_safe, safe_url
from rag_bot.surfaces.ui.render import paper_place, paper_url, writer_label
from rag_bot.text import clean_markup, mask_credentials
from rag_bot.types import Paper, Turn

PERMALINK_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;line-height:1.5}"
    ".answer table{border-collapse:collapse}.answer th,.answer td{border:1px solid #ccc;padding:.2rem .5rem}"
    ".quote{opacity:.8;font-size:.9em;margin:.2rem 0 .8rem 1rem}.meta{opacity:.7;font-size:.85em}"
)


def saved_answer_html(text: str) -> str:
    """A saved answer's Markdown as HTML, as the chat shows it (headings, emphasis, lists, tables, line breaks)
    under the shared rules: raw HTML shown as text, images not rendered (their `!` stays text and the link a
    link), only http(s) or in-page links, credentials masked."""
    return _saved_markdown().render(markdown_safe(text))  # markdown_safe masks credentials too


@lru_cache(maxsize=1)
def _saved_markdown() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])
    md.disable("image")
    md.validateLink = lambda url: safe_url(url) is not None or url.startswith("#")  # type: ignore[method-assign]
    return md


def permalink_page(turn: Turn | None, papers: Mapping[str, Paper], when: float | None = None) -> str:
    """The read-only page of one saved answer: question, notice and references escaped, the answer's Markdown
    rendered by `saved_answer_html` (corpus text, model text and questions are untrusted); a short "not found"
    page for None."""
    head = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">'
            f"<title>rag-bot answer</title><style>{PERMALINK_STYLE}</style></head><body>")
    if turn is None:
        return head + "<h1>Answer not found</h1><p>This permalink is unknown or its conversation was deleted.</p></body></html>"
    import time

    parts = [head, f"<h1>{html.escape(turn.question)}</h1>"]
    if when is not None:
        parts.append(f'<p class="meta">Answered {time.strftime("%Y-%m-%d %H:%M", time.localtime(when))} by rag-bot'
                     f"{' (' + html.escape(writer_label(turn.answer.llm)) + ')' if turn.answer else ''}</p>")
    answer = turn.answer
    if answer is None:
        parts.append("<p>(no answer was saved)</p>")
    else:
        parts.append(f"<p><strong>{html.escape(words.certainty_line(answer.certainty))}</strong></p>")
        parts.append(f'<div class="answer">{saved_answer_html(answer.answer)}</div>')
        if answer.notice:
            parts.append(f"<p><em>{html.escape(mask_credentials(answer.notice))}</em></p>")
        if answer.citations:
            parts.append("<h2>References</h2><ol>")
            for c in answer.citations:
                paper = papers.get(c.doc_id)
                url = safe_url(paper_url(paper))
                link = f' · <a href="{html.escape(url)}" rel="noopener noreferrer">link</a>' if url else ""
                parts.append(
                    f'<li value="{c.n}"><strong>{html.escape(clean_markup(c.title))}</strong> '
                    f'<span class="meta">({html.escape(paper_place(paper, c.doc_id, c.source))}){link}</span>'
                    f'<div class="quote">“{html.escape(c.quote)}”</div></li>'
                )
            parts.append("</ol>")
    parts.append("</body></html>")
    return "".join(parts)
