"""Fitted decisions, loaded one way (rag_bot/fitted.py): a model fitted on other features than the code computes is
refused by name, and every shipped model says what it was fitted on, by which script, on which committed data."""

from __future__ import annotations

import re

import numpy as np
import pytest

from rag_bot import fitted
from rag_bot.fitted import FeatureMismatch, Fitted, Provenance, Weights
from rag_bot.grounding import relevance
from rag_bot.writing import cells, problems, roles, themes
from tests.conftest import MOVED_BY_ISSUE_38, ROOT

# Each shipped model as its decision loads it.
SHIPPED = {
    "relevance": (relevance.MODEL_FILE, lambda: relevance.load().to_json()),
    "roles": (roles.MODEL_FILE, lambda: fitted.to_json(roles._model(384))),
    "themes": (themes.MODEL_FILE, lambda: fitted.to_json(themes._model())),
    "problems": (problems.MODEL_FILE, lambda: fitted.to_json(problems._model())),
    "cells": (cells.MODEL_FILE, lambda: fitted.to_json(cells._model())),
}


def small(features=("similarity", "coverage", "rank"), classes=()) -> Fitted:
    n = len(features)
    weights = Weights(mean=(0.0,) * n, scale=(1.0,) * n, weights=[[0.0] * len(classes)] * n if classes else (1.0,) + (0.0,) * (n - 1),
                      bias=[0.0] * len(classes) if classes else 0.0)
    return Fitted(features=tuple(features), functions={"p": weights}, classes=tuple(classes),
                  provenance=Provenance(fitted_on="a test", script="tests/test_fitted.py"))


def test_a_model_fitted_on_other_features_is_refused_with_their_names(tmp_path):
    path = tmp_path / "model.json"
    fitted.save(path, small())
    with pytest.raises(FeatureMismatch, match="does not compute: rank.*not fitted on: margin"):
        fitted.load(path, ("similarity", "coverage", "margin"), ("p",))
    with pytest.raises(FeatureMismatch, match="in another order"):
        fitted.load(path, ("coverage", "similarity", "rank"), ("p",))
    fitted.save(path, small(classes=("problem", "method")))
    with pytest.raises(FeatureMismatch, match="classes this version does not compute: method"):
        fitted.load(path, ("similarity", "coverage", "rank"), ("p",), classes=("problem", "result"))


def test_the_role_model_refuses_vectors_of_another_size_by_name():
    """Sentence vectors of another embedding model (768 numbers, not MiniLM's 384) get an error, not a wrong role."""
    with pytest.raises(FeatureMismatch, match="vector 384"):
        roles.role_probabilities(np.zeros((2, 768)))


def test_a_saved_model_gives_the_probabilities_it_was_saved_with(tmp_path):
    path = tmp_path / "model.json"
    fitted.save(path, small())
    model = fitted.load(path, ("similarity", "coverage", "rank"), ("p",))
    rows = np.array([[0.0, 5.0, 1.0], [2.0, 0.0, 0.0]])
    assert model.probabilities(rows, "p") == pytest.approx([0.5, 1 / (1 + np.exp(-2.0))])
    assert model.provenance.fitted_on == "a test" and model.provenance.commit == "unknown"
    fitted.save(path, small(classes=("problem", "method")))
    softmax = fitted.load(path, ("similarity", "coverage", "rank"), ("p",), classes=("problem", "method"))
    assert softmax.probabilities(rows, "p") == pytest.approx(np.full((2, 2), 0.5))
    path.write_text('{"features": ["similarity"], "p": {"weights": [2.0], "bias": -1.0}, "fitted_on": "by hand"}')
    unscaled = fitted.load(path, ("similarity",), ("p",))  # no mean and scale: weights on the features as they are
    assert unscaled.probabilities(np.array([[0.5]]), "p") == pytest.approx([0.5])
    assert unscaled.provenance.script == "unknown" and unscaled.provenance.fitted_on == "by hand"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_model_states_its_script_and_the_data_it_was_fitted_on(name):
    path, written = SHIPPED[name]
    model = fitted.load(path, *{"relevance": (relevance.FEATURES, ("ask", "area")),
                                "roles": (roles.role_features(384), ("role",), roles.ROLES),
                                "themes": (themes.SIGNALS, ("fits",)),
                                "problems": (problems.SIGNALS, ("problem",)),
                                "cells": (cells.SIGNALS, tuple(cells.CELLS.values()))}[name])
    told = model.provenance
    assert told.fitted_on and (ROOT / MOVED_BY_ISSUE_38.get(told.script, told.script)).is_file(), told
    assert re.fullmatch(r"[0-9a-f]{40}", told.commit) and re.fullmatch(r"\d{4}-\d\d-\d\d", told.date), told
    assert told.data, f"{path.name} names no data file"
    for data, digest in told.data.items():
        assert fitted.sha256(ROOT / data) == digest, f"{data} changed since {path.name} was fitted on it"
    assert written() == path.read_text(encoding="utf-8"), "read and written again, the file would change"


def test_every_shipped_model_gives_probabilities():
    assert np.all(relevance.load().probabilities(np.zeros((2, len(relevance.FEATURES))), "summary") > 0)
    shares = roles.role_probabilities(np.ones((3, 384)) / np.sqrt(384))
    assert shares.shape == (3, len(roles.ROLES)) and np.allclose(shares.sum(axis=1), 1.0)
    assert 0 < themes.fit_probability(np.zeros((1, len(themes.SIGNALS))))[0] < 1
    assert 0 < problems.problem_scores(["However, it fails."], np.full((1, 5), 0.2))[0] < 1
    assert sorted(cells.cell_order(["We propose X.", "X improves accuracy by 3%."], np.full((2, 5), 0.2),
                                   "Approach")) == [0, 1]
