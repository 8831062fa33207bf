"""Logging set-up for the surfaces (CLI, chat): one stderr handler at `RAG_BOT_LOG_LEVEL`.

Modules log through `logging.getLogger(__name__)`; question text is logged at DEBUG only, keys never.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str) -> None:
    """Send rag-bot's log records at `level` and above to stderr (library chatter stays at WARNING)."""
    logger = logging.getLogger("rag_bot")
    logger.setLevel(level.upper())
    if not any(getattr(h, "_rag_bot", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._rag_bot = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False
