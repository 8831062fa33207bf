"""The Map tab: the collection drawn as topics a reader can name, each paper a point to hover and click.

The map is an SVG drawn here from the collection map (rag_bot/surfaces/collection_map.py): papers as points coloured by
topic, each topic's name written at its centre, the last answer's sources drawn as ★ over them, no axes (the two
directions of a projection mean nothing to a reader). Hovering a point shows the paper's title; clicking it opens
the paper's card under the map (a server function of the HTML component), with a button that asks about it in the
chat. At most `MAP_POINTS` papers are drawn (evenly spread, plus the last answer's sources); the legend counts
every paper. The SVG is built when the tab opens, so the chat's page never carries it.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Sequence

import gradio as gr
import numpy as np
from gradio.events import Dependency

from rag_bot.surfaces.collection_map import CollectionMap
from rag_bot.surfaces.ui import render
from rag_bot.surfaces.ui.base import Library, Shared
from rag_bot.surfaces.ui.render import cited_ids, map_label, map_legend, paper_place
from rag_bot.text import clean_markup
from rag_bot.types import Turn

log = logging.getLogger(__name__)

WIDTH, HEIGHT, MARGIN = 1000, 620, 24  # the drawing's units (it scales to the page's width)
# Tableau's ten colours and two more: distinct for the 12 topics a map has at most (choose_k).
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#8c564b")
MAP_HINT = "Hover a point for its title; click it to read the paper."
MAP_JS = """
element.addEventListener('click', async (event) => {
  const ask = event.target.closest('.map-ask');
  if (ask) {
    const box = document.querySelector('#question textarea');
    if (box) {
      box.value = 'Tell me about ' + ask.getAttribute('data-title');
      box.dispatchEvent(new Event('input', {bubbles: true}));
      const chat = [...document.querySelectorAll('button[role="tab"]')].find(b => b.textContent.trim() === 'Chat');
      if (chat) { chat.click(); }
      setTimeout(() => box.focus(), 100);
    }
    return;
  }
  const dot = event.target.closest('[data-id]');
  if (!dot) { return; }
  const card = element.querySelector('.map-card');
  if (card) { card.innerHTML = await server.paper_card(dot.getAttribute('data-id')); }
});
"""
MAP_CSS = """
#map svg { width: 100%; height: auto; background: var(--background-fill-secondary); border-radius: 8px; }
#map circle, #map path.cited { cursor: pointer; }
#map circle:hover { stroke: #000; stroke-width: 1.5; }
#map .topic-name { font: 600 15px sans-serif; fill: #222; paint-order: stroke; stroke: #fff; stroke-width: 4px;
  stroke-linejoin: round; pointer-events: none; }
#map .map-card { margin-top: 8px; }
#map .map-ask { margin-top: 6px; padding: 4px 10px; border: 1px solid var(--border-color-primary, #bbb);
  border-radius: 6px; background: var(--button-secondary-background-fill, #f3f4f6); cursor: pointer; }
"""


def _scaled(xy: np.ndarray) -> np.ndarray:
    """Map coordinates into the drawing, keeping their aspect ratio."""
    if len(xy) == 0:
        return xy
    low, high = xy.min(axis=0), xy.max(axis=0)
    span = np.maximum(high - low, 1e-9)
    scale = min((WIDTH - 2 * MARGIN) / span[0], (HEIGHT - 2 * MARGIN) / span[1])
    centre = (low + high) / 2
    out = (xy - centre) * scale + np.array([WIDTH / 2, HEIGHT / 2])
    out[:, 1] = HEIGHT - out[:, 1]  # SVG's y grows downwards
    return out


def _star(x: float, y: float, r: float = 9.0) -> str:
    angles = np.pi / 2 + np.arange(10) * np.pi / 5
    radii = np.where(np.arange(10) % 2 == 0, r, r * 0.45)
    points = " ".join(f"{x + rr * np.cos(a):.1f},{y - rr * np.sin(a):.1f}" for a, rr in zip(angles, radii))
    return f'M{points.replace(" ", " L")}Z'


def topic_name(label: str) -> str:
    """A topic's name without its number ("3. federated learning" -> "federated learning")."""
    number, _, name = label.partition(". ")
    return name if number.isdigit() and name else label


def map_svg(cmap: CollectionMap, cited: Sequence[str] = (), limit: int | None = None) -> str:
    """The map as an SVG (in a div with the card area under it): at most `limit` (`MAP_POINTS`) points evenly
    spread, plus the cited ones, drawn as ★."""
    if len(cmap) == 0:
        return '<div class="map-empty">The collection is empty: add papers to see their map.</div>'
    rows = cmap.sample(render.MAP_POINTS if limit is None else limit, cited)
    marked = set(cited)
    xy = _scaled(cmap.xy[rows])
    parts = [f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="Map of the collection by topic">']
    stars = []
    for (x, y), i in zip(xy, rows):
        topic = int(cmap.clusters[i])
        title = html.escape(f"{cmap.titles[i]} · {topic_name(cmap.labels[topic])}")
        doc_id = html.escape(cmap.doc_ids[i])
        if cmap.doc_ids[i] in marked:
            stars.append(f'<path class="cited" d="{_star(x, y)}" fill="#d62728" stroke="#fff" stroke-width="1" '
                         f'data-id="{doc_id}"><title>★ {title}</title></path>')
            continue
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.2" fill="{PALETTE[topic % len(PALETTE)]}" '
                     f'fill-opacity="0.75" data-id="{doc_id}"><title>{title}</title></circle>')
    parts += stars
    drawn = cmap.clusters[rows]
    for topic, label in enumerate(cmap.labels):  # names at each topic's centre (the median of its drawn points)
        mine = drawn == topic
        if mine.any():
            x, y = np.median(xy[mine], axis=0)
            parts.append(f'<text class="topic-name" x="{x:.0f}" y="{y:.0f}" text-anchor="middle">'
                         f"{html.escape(topic_name(label))}</text>")
    parts.append("</svg>")
    return f'<div class="map-box">{"".join(parts)}<div class="map-card"></div></div>'


class MapPanel:
    """The map and its legend; drawn when the tab opens (with the last answer's sources), renamed and recounted
    after an upload (`refresh_legend`). At most `map_points` (`MAP_POINTS`) papers are drawn."""

    def __init__(self, library: Library, shared: Shared, map_points: int = render.MAP_POINTS) -> None:
        self.library = library
        self.shared = shared
        self.map_points = map_points

    def render(self) -> None:
        with gr.Tab("Map", id="map") as self.tab:
            cmap = self.library.map
            self.legend = gr.Markdown(map_legend(cmap))
            self.label = gr.Markdown(self.caption(cmap, ()), elem_id="map-caption")

            def paper_card(doc_id: str) -> str:  # Gradio marks its server functions: a bound method cannot be
                return self.paper_card(doc_id)

            self.plot = gr.HTML("", elem_id="map", js_on_load=MAP_JS, css_template=MAP_CSS,
                                server_functions=[paper_card], apply_default_css=False)

    def refreshed(self) -> tuple[str, str]:
        """The legend and the caption of the collection's map as it is now."""
        return map_legend(self.library.map), self.caption(self.library.map, ())

    def register_events(self) -> None:
        self.tab.select(self.show, [self.shared.turns], [self.plot, self.label], api_visibility="private")

    def caption(self, cmap: CollectionMap, cited: Sequence[str]) -> str:
        """How many of the collection's papers the map draws, and how to use it."""
        shown = len(cmap.sample(self.map_points, cited))
        return f"{map_label(shown, len(cmap))}. {MAP_HINT}"

    def show(self, turns: Sequence[Turn]) -> tuple[str, str]:
        """The map with the last answer's sources marked, and its caption."""
        cmap = self.library.map
        cited = cited_ids(turns)
        return map_svg(cmap, cited, self.map_points), self.caption(cmap, cited)

    def paper_card(self, doc_id: str) -> str:
        """The card of a paper clicked on the map: title, where it is, abstract, and a button asking about it."""
        paper = self.library.papers.get(str(doc_id))
        if paper is None:
            return '<div class="src-card">That paper is no longer in the collection.</div>'
        title = clean_markup(paper.title)
        return (f'<div class="src-card"><div class="src-title">{html.escape(title)}</div>'
                f'<div class="src-meta">{html.escape(paper_place(paper, paper.doc_id, paper.source))}</div>'
                f'<div class="src-abstract">{html.escape(clean_markup(paper.text))}</div>'
                f'<button class="map-ask" data-title="{html.escape(title, quote=True)}">Ask about this paper'
                f"</button></div>")

    def refresh_legend(self, event: Dependency) -> None:
        """Rename and recount the topics after `event` (an upload)."""
        event.then(lambda: map_legend(self.library.map), None, [self.legend], api_visibility="private")
