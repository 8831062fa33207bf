"""The one logistic fitter of bench/: the relevance decision (relevance_fit.py) and the theme headings
(themes_fit.py) fit with it. Ridge logistic regression by Newton's method: the penalty is l2/2 |w|^2 on the summed
log loss, the bias unpenalised (themes_fit.py's former gradient descent minimised the same objective; its weights
agree to four decimals on random data).
"""

from __future__ import annotations

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
