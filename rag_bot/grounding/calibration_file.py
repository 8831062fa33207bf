"""A store's saved calibration of the relevance decision (rag_bot/grounding/calibrate.py fits it): where it lies,
whether the store needs one, and the decision grounding uses, calibrated to the store's model when it has one.

Saved in the store folder as `relevance-calibration-<collection>.json` (written atomically) and keyed by the model's
identity: for another model, or with none saved, answers say so in one line until `rag-bot calibrate` (or the end
of `rag-bot ingest`) fits one.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from rag_bot.errors import StoreError
from rag_bot.grounding import relevance
from rag_bot.grounding.relevance import Calibration, RelevanceModel
from rag_bot.settings import Settings
from rag_bot.store.embedders import embedder_name

log = logging.getLogger(__name__)

FILE_PREFIX = "relevance-calibration-"


def identity(settings: Settings) -> str:
    """What a calibration is keyed by: the name of the model that embeds the store's questions."""
    return embedder_name(settings)


def calibration_path(settings: Settings) -> Path:
    """Where a store's calibration is saved: its folder (a Chroma server's: the data folder)."""
    folder = settings.storage if not settings.chroma_url else settings.data_path()
    return Path(folder) / f"{FILE_PREFIX}{settings.collection}.json"


def needed(settings: Settings, model: RelevanceModel | None = None) -> bool:
    """Whether the store's model is not the one the fitted decision was fitted on."""
    model = model or relevance.load()
    return bool(model.embedder) and identity(settings) != model.embedder


def save(settings: Settings, calibration: Calibration, measured: Mapping[str, object]) -> Path:
    """Write the calibration atomically (a reader sees the old file or the new one, never half of one)."""
    path = calibration_path(settings)
    data = {"embedder": calibration.embedder, "paper": list(calibration.paper), "sentence": list(calibration.sentence),
            "measured": dict(measured), "reference": relevance.load().embedder}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:  # a read-only or full store folder: the store answers as before
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot save the calibration in {path.parent} ({exc.strerror or exc})") from None
    return path


def saved(settings: Settings) -> Calibration | None:
    """The store's saved calibration for its current model, or None (none saved, another model's, unreadable)."""
    path = calibration_path(settings)
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    return _read(path, stamp, identity(settings))


_READ: dict[tuple[Path, int, str], Calibration | None] = {}  # read once per file version: answers stat it only


def _read(path: Path, stamp: int, embedder: str) -> Calibration | None:
    key = (path, stamp, embedder)
    if key not in _READ:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            _READ[key] = (Calibration(paper=tuple(data["paper"]), sentence=tuple(data["sentence"]),  # type: ignore[arg-type]
                                      embedder=str(data["embedder"])) if data.get("embedder") == embedder else None)
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("%s is unreadable: the relevance decision is not calibrated (`rag-bot calibrate`)", path)
            _READ[key] = None
    return _READ[key]


def model_for(settings: Settings) -> tuple[RelevanceModel, str]:
    """The relevance decision for the settings' store, and a one-line note when it is not calibrated to its model
    ("" when it needs no calibration or has one)."""
    model = relevance.load()
    if not needed(settings, model):
        return model, ""
    calibration = saved(settings)
    if calibration is None:
        return model, (f"The relevance decision was fitted on {model.embedder}'s vectors, not {identity(settings)}'s: "
                       "refusals and sources may be off until `rag-bot calibrate` fits it to this store.")
    return replace(model, calibration=calibration), ""
