"""The locked split: which labelled items no weight, cut, rule or trained model may be chosen on.

An item (a question by its id, a paper by its doc_id) is locked when sha1(key) % 3 == 0: a third of every labelled
set, fixed by the key alone so every script, fitter and trainer (bench/, train/) draws the same line. Figures are
reported on both parts; a change that raises the fit part and lowers the locked part is reverted.
"""

from __future__ import annotations

import hashlib


def locked(key: str) -> bool:
    """Whether an item is in the locked part (never fitted, tuned or trained on)."""
    return int(hashlib.sha1(key.encode()).hexdigest(), 16) % 3 == 0
