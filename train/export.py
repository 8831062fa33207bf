"""Export a trained cross-encoder (train/cross_encoder.py) to int8 ONNX for the runtime, with its tokenizer.

    python -m train.export [--model train/out/cross-encoder/model] [--to train/out/cross-encoder/onnx]

ONNX opset 17 of a wrapper calling the BERT by keyword (transformers 5's forward takes other positional
arguments), then onnxruntime's dynamic quantisation: QInt8 weights, per channel, MatMul and Gather only
(../shared/TRAINING.md: 23 MB, cosine 0.99 to fp32 for the embedder). Prints the fp32 and int8 logits' agreement
on the pairs given. Writes `model.onnx`, `tokenizer.json` and `provenance.json` (the training's, plus the export's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer, BertForSequenceClassification

ROOT = Path(__file__).resolve().parent.parent


class Wrapper(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits


def main() -> int:
    from onnxruntime import InferenceSession
    from onnxruntime.quantization import QuantType, quantize_dynamic

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=ROOT / "train" / "out" / "cross-encoder" / "model")
    parser.add_argument("--to", type=Path, default=ROOT / "train" / "out" / "cross-encoder" / "onnx")
    args = parser.parse_args()
    model = BertForSequenceClassification.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    sample = tokenizer(["which paper keeps sparse attention fast on long inputs?"] * 2,
                       ["A sparse attention method. We propose ...", "Graph kernels for molecules. We study ..."],
                       padding=True, return_tensors="pt")
    inputs = (sample["input_ids"], sample["attention_mask"], sample["token_type_ids"])
    args.to.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "fp32.onnx"
        torch.onnx.export(Wrapper(model), inputs, str(fp32), opset_version=17, dynamo=False,
                          input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in
                                        ("input_ids", "attention_mask", "token_type_ids")} | {"logits": {0: "batch"}})
        out = args.to / "model.onnx"
        quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul", "Gather"])
        feeds = {k: v.numpy() for k, v in sample.items()}
        full = InferenceSession(str(fp32)).run(None, feeds)[0].ravel()
        small = InferenceSession(str(out)).run(None, feeds)[0].ravel()
    print(f"logits fp32 {np.round(full, 3).tolist()} int8 {np.round(small, 3).tolist()}; "
          f"{out.stat().st_size / 1e6:.1f} MB")
    tokenizer.backend_tokenizer.save(str(args.to / "tokenizer.json"))
    provenance = json.loads((args.model / "provenance.json").read_text()) if (args.model / "provenance.json").exists() else {}
    provenance["export"] = {"script": "train/export.py", "opset": 17, "quantisation": "QInt8 per channel, MatMul+Gather"}
    (args.to / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    shutil.copy(ROOT / "train" / "NOTICE", args.to / "NOTICE") if (ROOT / "train" / "NOTICE").exists() else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
