"""The Gradio chat: a thin surface over `Engine` (no retrieval, grounding or prompting logic here).

One module per panel — `chat` (the conversation), `history` (saved conversations), `sources` (the cited
papers), `collection` (browse, search, upload) and `map` (topics in 2-D) — over `render` (pure HTML/Markdown
rendering, tested directly) and `base` (the collection as the page shows it); `app` puts the page together and
serves it (with the read-only answer permalinks, /answer/<token>).
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # no calls home from a local tool

from rag_bot.surfaces.ui.app import auth_pairs, build_app, ensure_index, serve  # noqa: E402
from rag_bot.surfaces.ui.collection import check_upload  # noqa: E402
from rag_bot.surfaces.ui.render import MODES  # noqa: E402

__all__ = ["MODES", "auth_pairs", "build_app", "check_upload", "ensure_index", "serve"]
