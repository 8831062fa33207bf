"""The trained cross-encoder's int8 ONNX export at inference (onnxruntime and tokenizers, rag-bot's own
dependencies; no torch): reads a question with a paper's title and abstract together and gives one logit that the
paper answers it. bench/fit/relevance.py --cross weighs it as two more signals of the fitted decision, measured
beside today's model on the same rows (docs/eval.md, "A cross-encoder of our own"). Not part of the package: it
was measured and not adopted (it costs the seeds' dev questions answers), so answers do not run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from rag_bot.store.embedding import onnx_session
from rag_bot.text import clean_markup
from rag_bot.types import Paper

FOLDER = Path(__file__).with_name("out") / "cross-encoder" / "onnx"  # train/export.py writes it
# Question + title + abstract, the length it was trained at (train/cross_encoder.py); 256 at inference measured no
# better (docs/eval.md).
MAX_TOKENS = 192
BATCH = 16  # pairs per model call


@lru_cache(maxsize=2)
def _load(folder: Path = FOLDER) -> tuple[Any, Any]:
    from tokenizers import Tokenizer

    for name in ("model.onnx", "tokenizer.json"):
        if not (folder / name).exists():
            raise RuntimeError(f"cross-encoder file missing: {folder / name} (train/cross_encoder.py, then "
                               "train/export.py, make it)")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS, strategy="only_second")
    tokenizer.enable_padding()
    return onnx_session(folder / "model.onnx"), tokenizer


def passage(paper: Paper) -> str:
    """What the cross-encoder reads of a paper: its title and abstract, markup removed."""
    return f"{paper.title.strip()}. {clean_markup(paper.text).strip()}"


def scores(question: str, papers: Sequence[Paper], folder: Path = FOLDER) -> np.ndarray:
    """One logit per paper: how likely the cross-encoder finds that the paper answers the question."""
    if not papers:
        return np.zeros(0)
    session, tokenizer = _load(folder)
    out = []
    for start in range(0, len(papers), BATCH):
        encoded = tokenizer.encode_batch([(question, passage(p)) for p in papers[start:start + BATCH]])
        feeds = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                 "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                 "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64)}
        out.append(session.run(None, feeds)[0].reshape(-1))
    return np.concatenate(out).astype(float)
