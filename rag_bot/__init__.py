"""rag-bot: cited answers about a collection of research-paper abstracts, offline first.

The packages follow the data, each stage importing only the ones before it (tests/project/test_layout.py checks):

1. `reading` — files (seed text, JSONL, CSV, BibTeX, RIS, CSL-JSON, arXiv, OpenReview, Semantic Scholar) into
   `Paper`s and the problems found, and which records are one paper (`identity`).
2. `store` — papers into Chroma (chunks, paper and sentence vectors, the embedders), and back; export, import,
   re-embedding, repair; the saved conversations.
3. `retrieval` — a question into ranked papers (dense + BM25, names, an optional reranker) and the grounding that
   decides which of them answer it.
4. `writing` — grounded papers into a cited answer: the offline writer, the LLM writer and judge, citations,
   quotes, roles, themes, references.
5. `engine` — the one module that runs the stages for a question or an ingest.
6. `evaluation` — the labelled question sets and their metrics.
7. `surfaces` — what users touch: the CLI, the chat (`surfaces.ui`), the OpenAI-compatible API, the MCP server.

Shared by every stage: `types` (and `nodes`, the paper ⇄ llama-index node conversion), `settings`, `prompts`,
`text`, `sanitize`, `errors`, `logs`.
"""

__version__ = "0.1.0"
