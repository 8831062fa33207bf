"""`rag-bot calibrate`, and the same step at the end of `rag-bot ingest` and `ingest --reembed`: the relevance
decision fitted to the store's embedding model when it is not the one the decision was fitted on
(rag_bot/grounding/calibrate.py)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rag_bot.errors import StoreError
from rag_bot.settings import Settings

if TYPE_CHECKING:
    from rag_bot.engine import Engine


def calibrate_after_write(engine: Engine, changed: bool = True) -> None:
    """After a write: calibrate when the store's model needs it (an unchanged collection keeps its calibration), in
    one line either way; a failure leaves the store answering (uncalibrated, its answers say so) and says why."""
    from rag_bot.grounding.calibration_file import needed, saved

    if not engine.index.count() or not needed(engine.settings):
        return
    if not changed and saved(engine.settings) is not None:
        return
    try:
        print(_line(engine.calibrate()))
    except StoreError as exc:
        print(f"warning: the relevance decision was not calibrated to this store's model ({exc}); answers say so "
              "until `rag-bot calibrate` succeeds", file=sys.stderr)


def _line(said: str) -> str:
    return said[:1].upper() + said[1:] + "."


def cmd_calibrate(args: argparse.Namespace, settings: Settings) -> int:
    """Fit the relevance decision to the store's embedding model (a no-op line for the model it was fitted on)."""
    from rag_bot.engine import Engine

    try:
        print(_line(Engine(settings).calibrate()))
    except StoreError as exc:
        print(f"rag-bot: {exc}; nothing was saved (the store answers as before)", file=sys.stderr)
        return 1
    return 0
