"""The lexical cache: the fast copy of the collection that retrieval reads (BM25, word statistics, the name table,
the papers' records and their filterable fields), persisted so that a process start does not rebuild it from every
record of the store. `LexicalCache` is its public face; `papers` is the one reader of a paper's record.

A derived cache (rag_bot/store/caches.py): saved beside the store (`<storage>/lexicon/<key>/`) or, for a Chroma
server, in the user's cache folder (`$XDG_CACHE_HOME/rag-bot/lexicon/<server+collection>/<key>/`). The key is a hash
of the collection's state (`PaperIndex.state()`: both collections' ids and counts and the generation every writing
ingest changes) and of the cache's format, so a cache of another state or format is never used: it is rebuilt from
the store and saved again. While an ingest is writing (or after one was killed) nothing is saved. Files are plain
data (numpy arrays without pickles, JSON, bm25s's own format, the papers' records as zlib streams: `papers`); a
damaged or partial cache is rebuilt and replaced.

Modules: `cache` (the class, and loading), `build` (a build, a page of papers at a time), `papers` (records),
`columns` (filter fields as arrays), `rows` (the id table), `bm25_build` (BM25's matrix, paged).
"""

from rag_bot.retrieval.lexical.cache import LexicalCache, Lexicon

__all__ = ["LexicalCache", "Lexicon"]
