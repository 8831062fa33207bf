"""Pure rendering: answers, source cards, the sources panel, exports, the status line, tables and examples.

No Gradio here (so every function is tested directly). Everything from the collection or the user is
HTML-escaped before our own markup (links, <mark>) is added, so an abstract holding `<script>` shows as text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from rag_bot import answer_words as words
from rag_bot.sanitize import html_safe, markdown_safe, safe_url
from rag_bot.surfaces.collection_map import CollectionMap
from rag_bot.text import clean_markup, split_sentences
from rag_bot.types import Answer, Citation, Mode, Paper, Turn

# The chat's mode radio: label -> engine mode (None: the engine detects it from the question).
MODES: dict[str, Mode | None] = {"Auto": None, "Ask": "ask", "Summarize an area": "summary", "Compare": "compare"}
MODE_NAMES: dict[Mode, str] = {"ask": "Ask", "summary": "Summarize an area", "compare": "Compare"}
_CITE = re.compile(r"\[(\d+)\]")
# The paper table shows at most this many rows (the rest is reached by searching): every row is shipped to the
# browser in the page config. At 22,186 papers all rows took 3.05 MB of a 6.78 MB page config and ~1.6 s of the
# chat's start; 200 rows take 29 kB.
TABLE_ROWS = 200
TABLE_COLUMNS = ["Title", "Source", "ID", "Venue / year"]
# The map plots at most this many papers (evenly spread, plus the last answer's sources): enough to show each
# topic's shape. At 22,186 papers all points took 3.87 MB of the page config and ~0.9 s of the chat's start;
# 3,000 take 0.53 MB.
MAP_POINTS = 3000
MAP_LABEL = "Papers by topic (the last answer's sources: ★)"
EMPTY_SOURCES = ('<div class="sources-panel"><p>Sources of the answers appear here. Click a [n] in an answer to '
                 "jump to its source.</p></div>")


def chosen_mode(label: str | None) -> Mode | None:
    """The engine mode of a radio label, or of an engine mode name (ask, summary, compare); else None (auto)."""
    if label in MODES:
        return MODES[label]
    return next((mode for mode in MODE_NAMES if mode == label), None)


def markdown_text(text: str) -> str:
    """Text (from the corpus, the user or a model) made safe for the chat's Markdown renderer by the shared
    rules (`rag_bot.sanitize.html_safe`): HTML escaped, image syntax and non-http(s) link destinations
    neutralised (a `![x](http://...)` would make every reader's browser fetch the URL), any `user:password@` of
    a URL masked. http(s) links stay links: they load nothing until clicked."""
    return html_safe(text)


def answer_html(text: str, turn: int) -> str:
    """Answer Markdown made safe for the chat (`markdown_text`), each [n] a link to card n of this turn."""
    safe = markdown_text(text)
    return _CITE.sub(lambda m: f'<a class="cite" href="#src-{turn}-{m.group(1)}">[{m.group(1)}]</a>', safe)


def answer_message(answer: Answer, turn: int) -> str:
    """The chat message of a finished answer: its certainty in words, its text with linked markers, then its notice
    (if any)."""
    label = html.escape(words.certainty_label(answer.certainty))
    content = f'<p class="certainty" data-certainty="{answer.certainty}"><strong>{label}</strong></p>\n\n'
    if answer.searched_for:
        content += f"<p><em>{html.escape(words.SEARCHED_FOR.format(question=answer.searched_for))}</em></p>\n\n"
    content += answer_html(answer.answer, turn)
    if answer.notice:
        content += f"\n\n<em>{markdown_text(answer.notice)}</em>"
    return content


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


def paper_url(paper: Paper | None) -> str | None:
    """The paper's own URL, else the first link in its record."""
    if paper is None:
        return None
    return paper.url or (paper.links[0] if paper.links else None)


def paper_place(paper: Paper | None, doc_id: str, source: str) -> str:
    """Where a paper is: its source file and id, venue and year when known."""
    parts = [source, doc_id]
    if paper is not None and (paper.venue or paper.year):
        parts.append(" ".join(str(x) for x in (paper.venue, paper.year) if x))
    return " · ".join(parts)


def source_cards(answer: Answer, papers: Mapping[str, Paper], turn: int) -> str:
    """The cited papers of one answer as cards with ids `src-<turn>-<n>`."""
    cards = []
    for c in answer.citations:
        paper = papers.get(c.doc_id)
        url = safe_url(paper_url(paper))
        link = f' · <a href="{html.escape(url)}" target="_blank" rel="noopener noreferrer">link</a>' if url else ""
        abstract = highlight_quote(paper.text, c.quote) if paper else f"<mark>{html.escape(c.quote)}</mark>"
        cards.append(
            f'<div class="src-card" id="src-{turn}-{c.n}">'
            f'<div><span class="src-n">[{c.n}]</span><span class="src-title">{html.escape(clean_markup(c.title))}'
            f"</span></div>"
            f'<div class="src-meta">{html.escape(source_meta(c, paper))}{link}</div>'
            f'<div class="src-abstract">{abstract}</div></div>'
        )
    return "".join(cards)


def source_meta(citation: Citation, paper: Paper | None) -> str:
    """A source card's line under its title: where the paper is from, its probability, whether it may be related."""
    parts = [paper_place(paper, citation.doc_id, citation.source), words.probability_text(citation.probability)]
    return " · ".join(p for p in parts if p) + (" · " + words.MAY_BE_RELATED if citation.related else "")


def sources_panel(turns: Sequence[Turn], papers: Mapping[str, Paper]) -> str:
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
        return EMPTY_SOURCES
    return f'<div class="sources-panel">{"".join(sections)}</div>'


def export_markdown(turns: Sequence[Turn], papers: Mapping[str, Paper]) -> str:
    """The conversation as Markdown: each question, its answer and its references, under the sanitiser's rules
    (the file opens in Markdown viewers: no image, raw HTML or non-http(s) link from the corpus or a model)."""
    out = ["# rag-bot conversation", ""]
    for t, turn in enumerate(turns, start=1):
        out += [f"## {t}. {markdown_safe(turn.question)}", ""]
        if turn.answer is None:
            continue
        out += [f"_{words.certainty_line(turn.answer.certainty)}_", "", markdown_safe(turn.answer.answer), ""]
        if turn.answer.notice:
            out += [f"_{markdown_safe(turn.answer.notice)}_", ""]
        if turn.answer.citations:
            out += ["**References**", ""]
            for c in turn.answer.citations:
                paper = papers.get(c.doc_id)
                url = safe_url(paper_url(paper))
                place = paper_place(paper, c.doc_id, c.source)
                out.append(f"{c.n}. {markdown_safe(clean_markup(c.title))} ({markdown_safe(place)})"
                           f"{' ' + url if url else ''}")
                out.append(f"   > {markdown_safe(c.quote)}")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def answer_markdown(answer: Answer) -> str:
    """One answer with its references, as copied to the clipboard (under the sanitiser's Markdown rules)."""
    lines = [markdown_safe(answer.answer), "", words.certainty_line(answer.certainty)]
    if answer.citations:
        lines += ["", "References:"]
        lines += [f"[{c.n}] {markdown_safe(clean_markup(c.title))} ({c.source}, {c.doc_id}"
                  + (f", {words.probability_text(c.probability)})" if c.probability is not None else ")")
                  for c in answer.citations]
    return "\n".join(lines)


def writer_label(writer: str) -> str:
    """How the answer writer is shown: "offline" is the offline composer, anything else a model's name."""
    return "offline composer" if writer == "offline" else writer


def loading_line(progress: str, store: str) -> str:
    """The status line while the engine loads: what it is doing, and the store."""
    return f"{markdown_text(progress)} · {markdown_text(store)}"


def status_line(writer: str, papers: int, store: str) -> str:
    """Who writes the answers (`Engine.writer_name` or the last `Answer.llm`), collection size and store."""
    return (
        f"Answers by **{markdown_text(writer_label(writer))}** · **{papers}** papers indexed · "
        f"store: {markdown_text(store)}"
    )


def cited_ids(turns: Sequence[Turn]) -> list[str]:
    """The papers cited by the last answer of a conversation."""
    last = turns[-1].answer if turns else None
    return [c.doc_id for c in last.citations] if last else []


def example_prompts(cmap: CollectionMap, papers: Mapping[str, Paper]) -> list[list[str]]:
    """One example question per mode, made from the collection: names of its papers and its topics (papers are
    decoded only until the names are found)."""
    if len(cmap) == 0:
        return []

    def name(i: int) -> str | None:
        paper = papers.get(cmap.doc_ids[i])
        return paper.aliases[0] if paper and paper.aliases and len(paper.aliases[0]) <= 24 else None

    def named(rows: Sequence[int]) -> Iterator[int]:
        return (i for i in rows if name(i))

    examples: list[list[str]] = []
    clusters = sorted(set(cmap.clusters.tolist()))
    first = next(named(cmap.members(clusters[0])), None)
    if first is None:
        first = next(named(range(len(cmap))), None)
    if first is not None:
        examples.append([f"What does {name(first)} do, and what does it achieve?", "Ask"])
    terms = cmap.terms[clusters[0]] if cmap.terms else []
    if terms:
        examples.append([f"Summarize the work on {' and '.join(terms[:2])}", "Summarize an area"])
    # Two named papers of the same topic make the most telling comparison.
    for j in clusters:
        pair = list(islice(named(cmap.members(j)), 2))
        if len(pair) == 2:
            examples.append([f"Compare {name(pair[0])} and {name(pair[1])}", "Compare"])
            break
    if len(clusters) > 1 and cmap.terms[clusters[1]]:
        examples.append([f"Which papers study {cmap.terms[clusters[1]][0]}?", "Auto"])
    return examples


def natural_key(text: str) -> tuple[str | int, ...]:
    """A key that orders the numbers inside names by value: `x#2` before `x#10`."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text))


def paper_rows(cmap: CollectionMap, papers: Mapping[str, Paper], query: str = "") -> list[int]:
    """The map's rows, by source then id (`x#2` before `x#10`), whose title, source, id, venue, year or abstract
    contain every word of the query (all rows for no query: then no paper is decoded, the map holds them)."""
    order = sorted(range(len(cmap)), key=lambda i: (natural_key(cmap.sources[i]), natural_key(cmap.doc_ids[i])))
    words = query.lower().split()
    if not words:
        return order
    found = []
    for i in order:
        paper = papers.get(cmap.doc_ids[i])
        hay = (f"{cmap.titles[i]} {cmap.sources[i]} {cmap.doc_ids[i]} {cmap.venues[i]} {cmap.years[i] or ''} "
               f"{paper.text if paper else ''}").lower()
        if all(w in hay for w in words):
            found.append(i)
    return found


def paper_table(cmap: CollectionMap, rows: Sequence[int], limit: int | None = None) -> Any:
    """The first `limit` (`TABLE_ROWS`) of the rows (from `paper_rows`) as a DataFrame: title, source, id,
    venue/year."""
    import pandas as pd

    limit = TABLE_ROWS if limit is None else limit
    table = [
        [cmap.titles[i], cmap.sources[i], cmap.doc_ids[i],
         " ".join(str(x) for x in (cmap.venues[i], cmap.years[i]) if x)]
        for i in rows[:limit]
    ]
    return pd.DataFrame(table, columns=TABLE_COLUMNS)


def table_caption(found: int, query: str = "", limit: int | None = None) -> str:
    """The line over the paper table: how many papers there are (or match the search) and how many it shows
    (at most `limit`, by default `TABLE_ROWS`)."""
    limit = TABLE_ROWS if limit is None else limit
    papers = f"{found:,} paper{'s' if found != 1 else ''}"
    if query.strip():
        if found > limit:
            return f"{papers} match; showing the first {limit:,}"
        return f"{papers} match{'es' if found == 1 else ''}" if found else "No paper matches"
    if found > limit:
        return f"Showing {limit:,} of {papers}; search to narrow"
    return papers


def map_label(shown: int, total: int) -> str:
    """The plot's label, saying when it draws a sample of the papers."""
    return MAP_LABEL if shown >= total else f"{MAP_LABEL} · {shown:,} of {total:,} papers shown"


def map_legend(cmap: CollectionMap) -> str:
    """The topics of the map with their sizes (over every paper, even when the plot draws a sample), as
    Markdown."""
    return "Topics (k-means on the abstract embeddings, named by their distinctive terms): " + "; ".join(
        f"**{markdown_text(label)}** ({count:,})" for label, count in zip(cmap.labels, cmap.sizes())
    )


def upload_summary(added: int, updated: int, unchanged: int, files: int, seconds: float, papers: int,
                   rejected: Sequence[str], notes: Sequence[str] = ()) -> str:
    """What an upload did, as Markdown: the counts (when anything was indexed), `notes` on them, what was rejected."""
    lines = []
    if files:
        lines.append(
            f"**{added} added**, {updated} updated, {unchanged} skipped "
            f"(already indexed, unchanged) from {files} file(s) in {seconds:.1f} s. "
            f"The collection now holds {papers} papers; new papers are answerable now."
        )
    lines += [markdown_text(note) for note in notes]
    if rejected:
        lines.append(f"**{len(rejected)} rejected:**")
        lines += [f"- {markdown_text(r)}" for r in rejected[:50]]
        if len(rejected) > 50:
            lines.append(f"- … and {len(rejected) - 50} more")
    return "\n".join(lines)



def permalink_html(link: str | None) -> str:
    """The line under a saved answer: its read-only permalink (relative, so it works under any base URL)."""
    if not link:
        return ""
    href = f"answer/{html.escape(link)}"
    return f'\n\n<a class="permalink" href="{href}" target="_blank" rel="noopener noreferrer">Permalink</a>'


def conversation_messages(turns: Sequence[Turn], links: Sequence[str | None] = ()) -> list[dict[str, str]]:
    """The Chatbot messages of a saved conversation, rendered as the live answers were."""
    messages = []
    for t, turn in enumerate(turns, start=1):
        messages.append({"role": "user", "content": markdown_text(turn.question)})
        if turn.answer is not None:
            link = links[t - 1] if t - 1 < len(links) else None
            messages.append({"role": "assistant", "content": answer_message(turn.answer, t) + permalink_html(link)})
    return messages


def conversation_label(title: str, updated: float, turns: int) -> str:
    """A saved conversation in the list: its title, when it was last extended, how many turns."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(updated))
    return f"{' '.join(title.split())} · {when} · {turns} turn{'s' if turns != 1 else ''}"
