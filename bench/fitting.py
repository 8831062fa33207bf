"""The fitters of bench/, in one module: every shipped model fitted on labels is fitted here (issue 38, item 3).

- `fit_logistic`: ridge logistic regression by Newton's method: the penalty is l2/2 |w|^2 on the summed log loss,
  the bias unpenalised. The relevance decision (bench/fit/relevance.py) and the theme headings
  (bench/fit/themes.py) fit with it (themes' former gradient descent minimised the same objective; its weights
  agree to four decimals on random data).
- `fit_softmax`: ridge softmax regression by gradient descent with momentum, for several classes: the sentence
  roles (bench/fit/roles.py) and the Problem cell (bench/fit/problem_cell.py, its role models refitted by fold and
  its two-class cell model).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, sample: np.ndarray | None = None
                 ) -> tuple[np.ndarray, float]:
    """Ridge logistic regression by Newton's method (weights, bias) on standardised x, each row weighted by
    `sample` (mean 1)."""
    n, d = x.shape
    s = np.ones(n) if sample is None else sample * n / sample.sum()
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros(d + 1)
    penalty = np.diag([l2] * d + [0.0])
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(a @ w, -30, 30)))
        grad = a.T @ (s * (p - y)) + penalty @ w
        hess = (a * (s * p * (1 - p))[:, None]).T @ a + penalty + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w[:d], float(w[d])


def fit_softmax(x: np.ndarray, y: np.ndarray, classes: int, l2: float, steps: int = 400) -> np.ndarray:
    """Weights (features + 1, classes) of a ridge softmax regression, by gradient descent with momentum."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    w = np.zeros((d + 1, classes))
    onehot = np.eye(classes)[y]
    velocity = np.zeros_like(w)
    for _ in range(steps):
        z = a @ w
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        grad = a.T @ (p - onehot) / n
        grad[:-1] += l2 * w[:-1] / n
        velocity = 0.9 * velocity - 0.5 * grad
        w += velocity
    return w


def tell_shipped(path: Path, written: bool) -> None:
    """Say on stderr whether a fitter overwrote the shipped model at `path` (only `--write` does)."""
    where = path.resolve().relative_to(Path(__file__).resolve().parents[1])
    print(f"wrote the SHIPPED model {where}" if written else f"the SHIPPED model {where} is unchanged (--write saves it)",
          file=sys.stderr)
