"""Evaluation: a labelled question set run through the engine (`evaluate`), scored by `metrics` (recall, MRR,
refusal and fact accuracy, citation integrity). Used by `rag-bot eval` and bench/."""
