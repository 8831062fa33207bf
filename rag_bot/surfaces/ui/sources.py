"""The sources panel: the cited papers of every answer, as cards that the answers' [n] markers link to."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import gradio as gr

from rag_bot.surfaces.ui.base import Library
from rag_bot.surfaces.ui.render import EMPTY_SOURCES, sources_panel
from rag_bot.types import Turn

log = logging.getLogger(__name__)


class SourcesPanel:
    """The right-hand column of the Chat tab; the chat updates it through `show` and `empty`."""

    def __init__(self, library: Library) -> None:
        self.library = library

    def render(self) -> None:
        gr.Markdown("### Sources")
        self.html = gr.HTML(EMPTY_SOURCES, elem_id="sources")

    def show(self, turns: Sequence[Turn]) -> str:
        """The panel for a conversation: the latest answer's sources open, earlier ones folded."""
        return sources_panel(turns, self.library.papers)

    @staticmethod
    def empty() -> str:
        return EMPTY_SOURCES
