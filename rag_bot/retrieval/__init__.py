"""Retrieval: a question into the collection's papers, ranked.

Takes a question and the store; returns ranked papers (`retrieve.PaperRetriever`, a llama-index retriever fusing
Chroma's dense scores with BM25 from the `lexical` cache and the papers' names), optionally reranked (`rerank`).
Whether they answer the question, and which become sources, is the next stage's decision (rag_bot/grounding/).
"""
