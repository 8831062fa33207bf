"""A local embedding model of the user's choice, from a folder on disk (RAG_BOT_EMBED_PATH); never a download.

Two kinds of folder are read:
- an ONNX export: `model.onnx` (or `onnx/model.onnx`) with `tokenizer.json`, run by onnxruntime as the shipped
  model is;
- a sentence-transformers folder of a BERT-family encoder (`config.json`, `model.safetensors`, `tokenizer.json`,
  as `SentenceTransformer.save()` writes it): its weights are read from the safetensors file (a JSON header, then
  raw little-endian arrays) and run by numpy, with mean pooling, so no deep-learning framework is needed.

Vectors are L2-normalised. A folder missing a file, holding a damaged one, or of an architecture this reader does
not run, stops with one line saying what is there and what is needed.

A store records a folder by its name (in every fingerprint: the folder can be moved freely) and by the sha256 of the
files that decide its vectors (`weights_digest`), so that two folders of the same name never mix their vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

from rag_bot.errors import StoreError
from rag_bot.store.embedding import MiniLMEmbedding, onnx_session
from rag_bot.text import one_line

log = logging.getLogger(__name__)

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None, "I64": "<i8"}


class ModelFolderError(StoreError):
    """A model folder that cannot be used: the message is the one line shown to the user."""


def local_name(path: Path) -> str:
    """What identifies a folder's vectors in a store's fingerprints (its folder name: move it freely)."""
    return f"local:{Path(path).expanduser().resolve().name}"


# Files are hashed a block at a time, so a model is never held whole for its hash. The 90 MB MiniLM fp32 folder
# (safetensors, config, tokenizer) hashes in 0.06 s warm, 0.15 s cold: a hash is kept per (file, size, mtime) for
# the process, not on disk.
_HASH_BLOCK = 1 << 20
_file_digests: dict[tuple[str, int, int], str] = {}


def runnable_files(folder: Path) -> list[Path]:
    """The model files of a folder that this reader runs: its ONNX export, else its safetensors and config.json
    (empty when it has neither)."""
    onnx = next((f for f in (folder / "model.onnx", folder / "onnx" / "model.onnx") if f.is_file()), None)
    if onnx is not None:
        return [onnx]
    pair = [folder / "model.safetensors", folder / "config.json"]
    return pair if all(f.is_file() for f in pair) else []


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _file_digests:
        sha = hashlib.sha256()
        with path.open("rb") as f:
            while block := f.read(_HASH_BLOCK):
                sha.update(block)
        _file_digests[key] = sha.hexdigest()
    return _file_digests[key]


def weights_digest(path: Path) -> str | None:
    """The sha256 of what decides a model folder's vectors (its weights, config and tokenizer), streamed; None when
    the folder has no model to run (opening it says why)."""
    folder = Path(path).expanduser()
    files = runnable_files(folder) if folder.is_dir() else []
    if not files or not (folder / "tokenizer.json").is_file():
        return None
    sha = hashlib.sha256()
    try:
        for file in [*files, folder / "tokenizer.json"]:
            sha.update(f"{file.relative_to(folder).as_posix()}\0{_file_digest(file)}\n".encode())
    except OSError as exc:
        raise ModelFolderError(f"{folder}: cannot read {exc.filename or 'a model file'} ({exc.strerror})") from None
    return sha.hexdigest()


def folder_mismatch(collection: str, stored_folder: str, stored_digest: str, path: Path) -> str | None:
    """Why the folder the settings choose is not the one a collection was embedded with, though it has the same
    name (one line naming both, and the fix); None when its weights are the recorded ones."""
    digest = weights_digest(path)
    if digest is None or digest == stored_digest:
        return None
    chosen = str(Path(path).expanduser().resolve())
    if chosen == stored_folder:
        what = (f"the model folder {chosen} has changed since the collection {collection!r} was embedded with it "
                f"(weights sha256 {stored_digest[:12]} then, {digest[:12]} now)")
    else:
        what = (f"the collection {collection!r} was embedded with the model folder {stored_folder or '(unrecorded)'} "
                f"(weights sha256 {stored_digest[:12]}), but RAG_BOT_EMBED_PATH={chosen} is another model of the same "
                f"name (weights sha256 {digest[:12]})")
    return (f"{what}: their vectors are not comparable; set RAG_BOT_EMBED_PATH back, move the collection to this "
            f"folder's model with `rag-bot ingest --reembed`, or index into a new collection (RAG_BOT_COLLECTION=...)")


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a safetensors file (8-byte header length, JSON header, then the raw data); a damaged file
    (truncated, or a header that does not describe its data) is one line."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    out = {}
    try:
        if len(raw) < 8 or size > len(raw) - 8:
            raise ValueError(f"its header claims {size:,} bytes of a {len(raw):,}-byte file")
        header = json.loads(raw[8:8 + size])
        body = memoryview(raw)[8 + size:]
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = _DTYPES.get(info["dtype"])
            if dtype is None:
                raise ModelFolderError(f"{path}: tensor {name} is {info['dtype']}; this reader runs F32 and F16 "
                                       "weights")
            start, end = (int(n) for n in info["data_offsets"])
            if not 0 <= start <= end <= len(body):
                raise ValueError(f"tensor {name} lies past the end of the file (truncated?)")
            out[name] = np.frombuffer(body[start:end], dtype=dtype).reshape(info["shape"]).astype(np.float32)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # JSON and Unicode errors are ValueErrors
        reason = str(exc)[:160] if isinstance(exc, ValueError) else f"{type(exc).__name__} {str(exc)[:80]}"
        raise ModelFolderError(f"{path}: not a whole safetensors file ({reason}); copy or save the model again") \
            from None
    return out


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _erf(x: np.ndarray) -> np.ndarray:
    """The error function, vectorised (Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class BertEncoder:
    """A BERT encoder's forward pass in numpy, from a sentence-transformers folder's weights."""

    def __init__(self, folder: Path) -> None:
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            if not isinstance(config, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            raise ModelFolderError(f"{folder / 'config.json'} cannot be read ({str(exc)[:120]})") from None
        if config.get("model_type") not in ("bert",) or config.get("hidden_act", "gelu") != "gelu":
            raise ModelFolderError(f"{folder}: a {config.get('model_type')!r} model; this reader runs BERT "
                                   "encoders (MiniLM, BGE, E5, GTE): export others to ONNX (model.onnx)")
        weights = read_safetensors(folder / "model.safetensors")
        self.w = {k.removeprefix("bert."): v for k, v in weights.items()}
        try:
            self.layers = int(config["num_hidden_layers"])
            self.heads = int(config["num_attention_heads"])
            self.eps = float(config.get("layer_norm_eps", 1e-12))
            self.dimensions = int(config["hidden_size"])
            # One token through every layer: a missing tensor or one of the wrong shape is found now, as one line,
            # not in the middle of an ingest.
            self.run(np.zeros((1, 1), dtype=np.int64), np.ones((1, 1), dtype=np.int64))
        except (KeyError, ValueError, TypeError, IndexError) as exc:
            what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)[:120]
            raise ModelFolderError(f"{folder}: its weights do not fit its config.json ({what}); copy or save the "
                                   "model again") from None

    def run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Hidden states (batch, length, hidden) of padded token ids."""
        w = self.w
        length = ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        batch, hidden = ids.shape[0], x.shape[-1]
        size = hidden // self.heads
        blocked = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
        for n in range(self.layers):
            p = f"encoder.layer.{n}."

            def dense(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + blocked
            scores -= scores.max(axis=-1, keepdims=True)
            attn = np.exp(scores)
            attn /= attn.sum(axis=-1, keepdims=True)
            context = (attn @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = _layer_norm(dense(context, "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"],
                            w[p + "attention.output.LayerNorm.bias"], self.eps)
            inner = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(dense(inner, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"], self.eps)
        return np.asarray(x)


def open_folder(path: Path, max_tokens: int) -> tuple[Any, Any, int | None]:
    """(tokenizer, runner, dimensions) of a model folder: the runner is an onnxruntime session or a BertEncoder."""
    from tokenizers import Tokenizer

    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise ModelFolderError(f"RAG_BOT_EMBED_PATH={path}: not a folder (give the folder holding the model)")
    tokenizer_file = folder / "tokenizer.json"
    if not tokenizer_file.exists():
        raise ModelFolderError(f"{folder}: no tokenizer.json (save the model with its tokenizer)")
    try:
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
    except Exception as exc:  # the tokenizers library raises a bare Exception for a file it cannot read
        raise ModelFolderError(f"{tokenizer_file} cannot be read as a tokenizer ({exc})") from None
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    files = runnable_files(folder)
    if files and files[0].suffix == ".onnx":
        try:
            return tokenizer, onnx_session(files[0]), None
        except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, ...) for a bad file
            why = one_line(exc, 160)
            raise ModelFolderError(f"{files[0]} cannot be loaded by onnxruntime ({why})") from None
    if files:
        encoder = BertEncoder(folder)
        rows = len(encoder.w["embeddings.word_embeddings.weight"])
        if tokenizer.get_vocab_size() > rows:
            raise ModelFolderError(f"{tokenizer_file} has {tokenizer.get_vocab_size():,} word pieces, but the model "
                                   f"knows {rows:,}: the tokenizer is another model's")
        return tokenizer, encoder, encoder.dimensions
    found = ", ".join(sorted(p.name for p in folder.iterdir())[:8]) or "nothing"
    raise ModelFolderError(f"{folder}: no model.onnx, and no config.json with model.safetensors (found {found})")


class FolderEmbedding(MiniLMEmbedding):
    """Sentence embeddings (mean-pooled, L2-normalised) from a model folder of the user's (rag_bot/store/local_embedding.py)."""

    _dimensions: int = PrivateAttr()
    _folder_name: str = PrivateAttr()

    def __init__(self, path: Path, max_tokens: int = 256, embed_batch_size: int = 16) -> None:
        BaseEmbedding.__init__(self, model_name=local_name(path), max_tokens=max_tokens,
                               embed_batch_size=embed_batch_size)
        self._tokenizer, self._session, dimensions = open_folder(path, max_tokens)
        self._folder_name = local_name(path)
        try:
            self._dimensions = dimensions or int(self._embed_batch(["dimensions"]).shape[1])
        except Exception as exc:  # an ONNX graph that loads but does not run as a sentence encoder
            why = one_line(exc, 160)
            raise ModelFolderError(f"{path}: its model does not run as a sentence encoder ({why})") from None
        log.info("embedding model loaded from %s (%d dimensions)", path, self._dimensions)

    @classmethod
    def class_name(cls) -> str:
        return "FolderEmbedding"

    @property
    def name(self) -> str:
        return self._folder_name

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if hasattr(self._session, "get_inputs"):
            return super()._forward(ids, mask)
        return np.asarray(self._session.run(ids, mask))
