"""Grounding: retrieval's ranked papers into the decision whether the collection answers, and from which papers.

Takes the question and its ranked candidates; returns a `Grounding` (rag_bot/types.py: its certainty, the confidence,
the source papers, what the collection lacks), from `decide.GroundingStage`, which the engine hands to the writer. The
decision is one fitted model (`relevance`, weights in `relevance_model.json`), calibrated to another embedding model
by `calibrate` (saved beside the store: `calibration_file`); with an LLM writer, `judge` lets the model review the
sources through a `generate` call the engine hands it.
"""
