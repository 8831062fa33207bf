"""The Map tab: the collection in 2-D by topic, the last answer's sources as their own ★ series."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import gradio as gr

from rag_bot.types import Turn
from rag_bot.ui.base import Library, Shared
from rag_bot.ui.render import cited_ids, map_frame, map_label, map_legend

log = logging.getLogger(__name__)


class MapPanel:
    """The map and its legend; it follows the conversation (`follow`) and the collection (`refresh_legend`). The
    plot draws at most `MAP_POINTS` papers (and the last answer's sources); the legend counts every paper."""

    def __init__(self, library: Library, shared: Shared) -> None:
        self.library = library
        self.shared = shared

    def render(self) -> None:
        with gr.Tab("Map", id="map") as self.tab:
            cmap = self.library.map
            self.legend = gr.Markdown(map_legend(cmap))
            frame = map_frame(cmap)
            self.plot = gr.ScatterPlot(
                frame, x="x", y="y", color="topic",
                tooltip=["title", "topic", "id"], x_title="component 1", y_title="component 2",
                elem_id="map", label=map_label(len(frame), len(cmap)),
            )

    def register_events(self) -> None:
        self.tab.select(self.show, [self.shared.turns], [self.plot], api_visibility="private")

    def show(self, turns: Sequence[Turn]) -> Any:
        """The plot with the last answer's sources marked."""
        cmap = self.library.map
        frame = map_frame(cmap, cited_ids(turns))
        return gr.ScatterPlot(value=frame, label=map_label(len(frame), len(cmap)))

    def follow(self, event: Any) -> None:
        """Redraw the map after `event` (an answer), so its highlights are current whenever the tab opens."""
        event.then(self.show, [self.shared.turns], [self.plot], api_visibility="private")

    def refresh_legend(self, event: Any) -> None:
        """Rename and recount the topics after `event` (an upload)."""
        event.then(lambda: map_legend(self.library.map), None, [self.legend], api_visibility="private")
