"""Retrieval and grounding: a question into the papers that answer it.

Takes a question and the store; returns ranked papers (`retrieve.PaperRetriever`, a llama-index retriever fusing
Chroma's dense scores with BM25 from the `lexical` cache and the papers' names), optionally reranked (`rerank`), then
the grounding decision (`ground`, with the fitted `relevance` model): which papers are sources, or what is missing.
"""
