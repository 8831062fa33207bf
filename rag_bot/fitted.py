"""Fitted decisions, loaded one way: a JSON file of weights on named features, its cuts, and where it comes from.

Every decision rag-bot fits on labelled data (grounding/relevance.py's relevance, writing/roles.py's sentence roles,
writing/themes.py's headings, writing/problems.py's Problem cell) is saved by its script in bench/ as one file:

    {"features": [names, in the order of the weights],
     "classes": [names] (a softmax only: one column of weights and one bias per class),
     "<function>": {"mean": [...], "scale": [...], "weights": [...], "bias": ...} (one or more, each a logistic or a
                   softmax over the features standardised by mean and scale, when given),
     "cuts": {"<function>": {"<name>": a probability, or [[collection size, probability], ...]}},
     "fitted_on": "what it was fitted on, in words", other fields the decision reads (kept as written),
     "provenance": {"script": ..., "commit": ..., "date": ..., "data": {"path in the repository": "sha256"}}}

`load` refuses a file fitted on other features or classes than its caller computes, naming the difference.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

ROOT = Path(__file__).resolve().parents[1]  # the repository: provenance paths are relative to it
Cut = float | list[list[float]]  # a probability, or [[collection size, probability], ...] read on a log scale


class FeatureMismatch(ValueError):
    """A fitted model's features (or classes) are not the ones its caller computes."""


@dataclass(frozen=True)
class Provenance:
    """Where a fitted model comes from: the script that fitted it, the commit it ran at, the day, the committed data
    files it read (path → sha256), and what it was fitted on, in words; "unknown" where that was not recorded."""

    fitted_on: str = ""
    script: str = "unknown"
    commit: str = "unknown"
    date: str = "unknown"
    data: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Weights:
    """One fitted function over standardised features: a logistic (a weight per feature, one bias), or a softmax
    (a row of weights per feature with a column per class, a bias per class)."""

    mean: ArrayLike
    scale: ArrayLike
    weights: ArrayLike
    bias: ArrayLike

    def probabilities(self, rows: np.ndarray) -> np.ndarray:
        """A logistic's probability per row of features, or a softmax's row of class probabilities."""
        weights = np.asarray(self.weights, dtype=float)
        if len(rows) == 0:
            return np.zeros((0, *weights.shape[1:]))
        z = (np.asarray(rows, dtype=float) - np.asarray(self.mean)) / np.asarray(self.scale)
        if weights.ndim == 1:
            return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z @ weights + np.asarray(self.bias), -30, 30))))
        # The bias as the weight of one more, constant feature: the product the softmax was fitted with.
        scores = np.hstack([z, np.ones((len(z), 1))]) @ np.vstack([weights, np.asarray(self.bias, dtype=float)])
        scores -= scores.max(axis=1, keepdims=True)
        p = np.exp(scores)
        return np.asarray(p / p.sum(axis=1, keepdims=True))


@dataclass(frozen=True)
class Fitted:
    """A fitted decision: its features, its functions by name, their cuts, where it comes from, and the other
    fields its file holds (`notes`, as written: the relevance model's embedder statistics, a fitter's figures)."""

    features: tuple[str, ...]
    functions: Mapping[str, Weights]
    cuts: Mapping[str, Mapping[str, Cut]] = field(default_factory=dict)
    provenance: Provenance = field(default_factory=Provenance)
    classes: tuple[str, ...] = ()
    notes: Mapping[str, object] = field(default_factory=dict)

    def probabilities(self, rows: np.ndarray, function: str) -> np.ndarray:
        """The named function's probabilities for rows of `features`."""
        return self.functions[function].probabilities(rows)

    def cut(self, function: str, name: str, collection_size: int = 0) -> float:
        """A fitted cut of a function, for a collection of this many papers when it was fitted per size."""
        return cut_at(self.cuts[function][name], collection_size)


def cut_at(value: Cut, collection_size: int = 0) -> float:
    """A cut that is one number, or one read between the sizes it was fitted at (log scale, held beyond them)."""
    if isinstance(value, (int, float)):
        return float(value)
    sizes = [math.log10(max(size, 1)) for size, _ in value]
    return float(np.interp(math.log10(max(collection_size, 1)), sizes, [cut for _, cut in value]))


def check(where: object, kind: str, fitted: Sequence[str], computed: Sequence[str]) -> None:
    """Refuse (`FeatureMismatch`) a model fitted on other features (or classes) than its caller computes."""
    if tuple(fitted) == tuple(computed):
        return

    def some(names: list[str]) -> str:
        return ", ".join(names[:6]) + (f", … ({len(names)} in all)" if len(names) > 6 else "")
    gone, new = [f for f in fitted if f not in computed], [f for f in computed if f not in fitted]
    said = [f"fitted on {kind} this version does not compute: {some(gone)}"] if gone else []
    said += [f"this version computes {kind} it was not fitted on: {some(new)}"] if new else []
    raise FeatureMismatch(f"{where}: " + ("; ".join(said) or f"fitted on the {kind} {some(list(fitted))} in another "
                                          f"order than this version computes them: {some(list(computed))}"))


def load(path: Path, features: Sequence[str], functions: Sequence[str], classes: Sequence[str] = ()) -> Fitted:
    """The fitted model saved in `path`, refused when its features or classes are not the caller's."""
    data = json.loads(path.read_text(encoding="utf-8"))
    check(path, "features", data["features"], features)
    check(path, "classes", data.get("classes", []), classes)
    missing = [name for name in functions if name not in data]
    if missing:
        raise FeatureMismatch(f"{path}: no fitted function {', '.join(missing)}")

    def part(d: dict) -> Weights:  # no mean and scale: fitted on the features as they are
        return Weights(mean=tuple(d.get("mean", [0.0] * len(features))), scale=tuple(d.get("scale", [1.0] * len(features))),
                       bias=tuple(d["bias"]) if classes else float(d["bias"]),
                       weights=tuple(tuple(w) for w in d["weights"]) if classes else tuple(d["weights"]))
    told = dict(data.pop("provenance", {}))
    provenance = Provenance(fitted_on=str(data.pop("fitted_on", "")), **told)
    fixed = {"features", "classes", "cuts", *functions}
    return Fitted(features=tuple(features), functions={name: part(data[name]) for name in functions},
                  cuts=data.get("cuts", {}), provenance=provenance, classes=tuple(classes),
                  notes={k: v for k, v in data.items() if k not in fixed})


def to_json(model: Fitted) -> str:
    """The model as `load` reads it."""
    def part(w: Weights) -> dict[str, object]:
        return {key: np.asarray(getattr(w, key)).tolist() for key in ("mean", "scale", "weights", "bias")}
    p = model.provenance
    data = {"features": list(model.features), **({"classes": list(model.classes)} if model.classes else {}),
            **{name: part(w) for name, w in model.functions.items()}, "cuts": model.cuts, "fitted_on": p.fitted_on,
            **model.notes, "provenance": {"script": p.script, "commit": p.commit, "date": p.date, "data": p.data}}
    return json.dumps(data, indent=1) + "\n"


def save(path: Path, model: Fitted) -> None:
    """Write a fitted model (a fitter in bench/ saves with this)."""
    path.write_text(to_json(model), encoding="utf-8")


def sha256(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(script: str, data: Sequence[Path], fitted_on: str) -> Provenance:
    """The provenance of a model fitted now, by `script` on the committed `data` files (as they are now)."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return Provenance(fitted_on=fitted_on, script=script, commit=commit or "unknown",
                      date=datetime.date.today().isoformat(),
                      data={Path(d).resolve().relative_to(ROOT).as_posix(): sha256(Path(d)) for d in data})
