"""Retrieval: a question -> papers ranked best first. It knows nothing of answers.

Dense search over the chunk and whole-abstract vectors in Chroma and BM25 (bm25s) over whole abstracts are
fused by weighted reciprocal rank; chunks are aggregated to their paper (max); papers the question names
("RULER", "CorrSteer", "Quartet 2") are found through the names they go by (rag_bot/retrieval/names.py) and put
first. `PaperRetriever` is the llama-index retriever of the query engine: one node per paper (rag_bot/nodes.py).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from rag_bot.nodes import PaperQuery, paper_node
from rag_bot.retrieval.lexical import LexicalCache
from rag_bot.retrieval.lexical.columns import Allowed, Columns
from rag_bot.retrieval.names import NAME_TOKEN, NameIndex, Usage, is_distinctive
from rag_bot.retrieval.spelling import Correction, Spelling
from rag_bot.settings import Settings
from rag_bot.store.index import PaperIndex
from rag_bot.text import normalize_name
from rag_bot.topics import spellings, topic_query
from rag_bot.types import Filters, Paper, ScoredPaper

if TYPE_CHECKING:
    from rag_bot.store.chroma import GuardedCollection

log = logging.getLogger(__name__)

# Reciprocal-rank fusion constant. 20, not the customary 60: with thousands of papers a paper ranked first by one
# retriever and absent from the other's list sank below papers both rank modestly (60: dev R@5 0.820 at 22,186
# papers, MRR@10 0.843 at 3,202; 20: 0.885 and 0.862; the seeds and CSFCube unchanged: bench/eval/fusion.py).
RRF_K = 20
LONG_QUESTION_WORDS = 25
FEEDBACK_PAPERS = 10  # top papers whose abstracts feed back into a long question
# A filter is applied by asking Chroma for OVERFETCH times the neighbours its share of the collection needs and
# keeping the allowed ones, or, when that would take more than LIST_ABOVE neighbours, by passing Chroma the list of
# its papers, at most IN_LIMIT of them (SQLite refuses a query of more than 32,766 variables: at 300,000 papers a
# filter of years 2019-2021 failed so; Chroma reads a query's results by a list of ids too, hence MAX_NEIGHBOURS).
# LIST_ABOVE is where the two cost the same on 100,000 papers (bench/perf/filter_limit.py, load 1.8: 1,600 neighbours
# 102 ms against the list's 144 ms; 4,000 neighbours 197 ms against 96 ms; docs/benchmarks.md).
IN_LIMIT = 20_000
OVERFETCH = 2.0
LIST_ABOVE = 2_500
MAX_NEIGHBOURS = 20_000
# Chroma searches in flight at once (each question sends two; a few chat users' questions share the threads).
_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="rag-bot-search")
# Endings that leave a real word when cut ("models", "processor", "logical"): a word cut by them is not a typo.
_ENDINGS = {"s", "d", "r", "y", "e", "n", "es", "ed", "er", "or", "al", "ly", "ic", "en", "ty", "st", "rs", "ds"}


def _fuse(dense: dict[str, float], lexical: dict[str, float], dense_weight: float) -> dict[str, float]:
    """Weighted reciprocal-rank fusion of two rankings."""
    fused: dict[str, float] = {}
    for ranking, weight in ((dense, dense_weight), (lexical, 1.0 - dense_weight)):
        if weight <= 0:
            continue
        for rank, doc_id in enumerate(sorted(ranking, key=ranking.__getitem__, reverse=True)):
            fused[doc_id] = fused.get(doc_id, 0.0) + weight / (RRF_K + rank + 1)
    return fused


@dataclass(frozen=True)
class Snapshot:
    """What retrieval knows of the collection at one moment: its papers, BM25 index, word statistics and alias
    table. Built whole and swapped in one assignment, so a question answered during an ingest sees either the
    old collection or the new one, never a mix."""

    papers: Mapping[str, Paper] = field(default_factory=dict)  # decoded when first read (rag_bot/retrieval/lexical/)
    ids: Sequence[str] = field(default_factory=list)  # BM25 row -> doc_id
    chunks: int = 0
    names: NameIndex = field(default_factory=NameIndex)
    bm25: Any = None
    doc_terms: Mapping[str, set[str]] = field(default_factory=dict)  # doc_id -> its stemmed words
    df: Mapping[str, int] = field(default_factory=dict)  # stemmed word -> papers holding it
    rows: Mapping[str, int] = field(default_factory=dict)  # doc_id -> its row in `ids` and `columns`
    columns: Columns | None = None  # the papers' filterable fields
    spelling: Spelling | None = None  # the papers' words as written, for correcting a question's spelling

    def idf(self, term: str) -> float:
        """Inverse document frequency of a stemmed word."""
        return math.log((len(self.ids) + 1) / (self.df.get(term, 0) + 0.5))

    def bm25_scores(self, stems: list[str], k: int, allowed: Allowed | None = None) -> dict[str, float]:
        """BM25 scores of the best `k` papers (among `allowed`, when given) for the stemmed query words it knows."""
        if self.bm25 is None:
            return {}
        known = self.bm25.vocab_dict
        stems = [t for t in stems if t in known]
        if not stems:
            return {}
        mask = None
        if allowed is not None:  # the filter is applied inside BM25, not to its top k
            mask = allowed.mask.astype(np.float32)
        docs, scores = self.bm25.retrieve([stems], k=min(k, len(self.ids)), show_progress=False, weight_mask=mask)
        return {self.ids[int(d)]: float(s) for d, s in zip(docs[0], scores[0]) if s > 0}

    def unique_names(self, question: str, stem: Callable[[str], list[str]]) -> list[str]:
        """Papers named by a word of the question that looks like a name (EvoClaw, Evo-Claw, FlashAttention) and
        occurs in exactly one abstract of the collection, though the paper's derived aliases lack it (a benchmark
        or method an abstract mentions without "we propose X")."""
        found: list[str] = []
        for raw in NAME_TOKEN.findall(question):
            if is_distinctive(raw):
                stems = stem(normalize_name(raw))
                if len(stems) == 1 and self.df.get(stems[0]) == 1:
                    found.extend(self.bm25_scores(stems, 1))
        return found

    def matching(self, filters: Filters | None) -> Allowed | None:
        """The papers that pass the filters (None: no filter, every paper), from the filter columns: no record is
        decoded."""
        if filters is None or filters.empty:
            return None
        # Every lexicon with papers has its columns (an empty one has neither).
        mask = self.columns.mask(filters) if self.columns is not None else np.zeros(len(self.ids), dtype=bool)
        return Allowed(self.ids, self.rows, mask)


def _nearest(
    collection: GuardedCollection, embedding: Sequence[float], k: int, size: int, key: str | None, allowed: Allowed | None, papers: int,
    list_above: int = LIST_ABOVE, in_limit: int = IN_LIMIT,
) -> list[tuple[str, float]]:
    """(doc_id, distance) of a collection's `k` nearest records, only of `allowed` papers when given: by asking
    for more neighbours than `k` and keeping the allowed ones (more again until `k` are found or the collection is
    exhausted), or, for a filter so narrow that would take more than `list_above` neighbours, by passing Chroma the
    list of its papers (exact; at most `in_limit`). `key` names the metadata holding a record's paper (None: the
    record's id is the paper's)."""
    def query(n: int, **where: Any) -> list[tuple[str, float]]:
        got = collection.query(query_embeddings=[embedding], n_results=min(n, size),
                               include=["metadatas", "distances"] if key else ["distances"], **where)
        metadatas = (got.get("metadatas") or [[]])[0] or [None] * len(got["ids"][0])
        return [(str((meta or {}).get(key, "")) if key else record_id, float(distance))
                for record_id, meta, distance in zip(got["ids"][0], metadatas, (got["distances"] or [[]])[0])]

    if allowed is None:
        return query(k)
    n = min(math.ceil(k * papers / len(allowed) * OVERFETCH), MAX_NEIGHBOURS)
    if n > list_above and len(allowed) <= in_limit:
        ids = sorted(allowed)
        return query(k, where={key: {"$in": ids}}) if key else query(k, ids=ids)
    while True:
        kept = [(d, dist) for d, dist in query(n) if d in allowed]
        if len(kept) >= k or n >= min(size, MAX_NEIGHBOURS):
            return kept[:k]
        n = min(n * 4, MAX_NEIGHBOURS)


class PaperRetriever(BaseRetriever):
    """llama-index retriever whose nodes are whole papers, ranked by fused dense + BM25 evidence.

    `list_above` and `in_limit` are when a filter reaches Chroma as the list of its papers (`_nearest`)."""

    def __init__(self, index: PaperIndex, settings: Settings, list_above: int = LIST_ABOVE,
                 in_limit: int = IN_LIMIT) -> None:
        super().__init__()
        import Stemmer

        self.index = index
        self.settings = settings
        self.list_above = list_above
        self.in_limit = in_limit
        self._stemmer = Stemmer.Stemmer("english")
        self._snapshot = Snapshot()
        self.reload()

    def reload(self) -> None:
        """Re-read the collection (after an ingest) for BM25, the word statistics and the alias table.

        The lexical side is built in every retrieval mode: grounding's word coverage needs it even when only
        the dense ranking is used (docs/eval.md)."""
        # From the cache of the collection's current state when there is one (rag_bot/retrieval/lexical/): start-up
        # does not grow with the collection; papers are decoded when first used.
        lexicon = LexicalCache(self.index).load_or_build(self._stemmer)
        self._snapshot = Snapshot(
            papers=lexicon.papers, ids=lexicon.ids, chunks=lexicon.chunks, names=NameIndex(by_key=lexicon.names),
            bm25=lexicon.bm25, doc_terms=lexicon.doc_terms, df=lexicon.df, rows=lexicon.rows, columns=lexicon.columns,
            spelling=lexicon.spelling,
        )
        log.info("retriever loaded %d papers (%d chunks) from the %s lexicon", len(lexicon.ids),
                 self._snapshot.chunks, lexicon.origin)

    @property
    def papers(self) -> Mapping[str, Paper]:
        """The collection, by doc_id."""
        return self._snapshot.papers

    @property
    def columns(self) -> Columns | None:
        """The collection's filterable fields as arrays (rag_bot/retrieval/lexical/columns.py)."""
        return self._snapshot.columns

    def corrected(self, question: str) -> Correction | None:
        """The question with the words neither the collection nor English knows corrected to the collection's
        nearest (rag_bot/retrieval/spelling.py), or None when there is none to correct (or no lexicon)."""
        spelling = self._snapshot.spelling
        return spelling.correct(question) if spelling is not None and self.settings.spelling else None

    def _dense(
        self, snap: Snapshot, question: str, k: int, embedding: list[float] | None = None,
        allowed: Allowed | None = None,
    ) -> dict[str, float]:
        """Best cosine similarity per paper, over its chunks and its whole-abstract vector (Chroma's cosine
        space reports distance = 1 - cosine); with `allowed`, only those papers (`_nearest`)."""
        return self._dense_search(snap, embedding or self.index.embedder.get_query_embedding(question), k, allowed)()

    def _dense_search(
        self, snap: Snapshot, embedding: list[float], k: int, allowed: Allowed | None,
    ) -> Callable[[], dict[str, float]]:
        """Start `_dense`'s two searches (chunks, whole abstracts) side by side and return what waits for them: the
        caller does its own work (BM25) meanwhile. Through a Chroma server each search is an HTTP round trip."""
        searches = [_SEARCHES.submit(_nearest, collection, embedding, k, size, key, allowed, len(snap.ids),
                                     self.list_above, self.in_limit)
                    for collection, size, key in ((self.index.chunks, snap.chunks, "doc_id"),
                                                  (self.index.papers, len(snap.ids), None)) if size]

        def best() -> dict[str, float]:
            found: dict[str, float] = {}
            for search in searches:
                for doc_id, distance in search.result():
                    if doc_id in snap.papers:  # a paper written after this snapshot is not ranked yet
                        found[doc_id] = max(found.get(doc_id, -1.0), 1.0 - distance)
            return found

        return best

    def _stems(self, text: str) -> list[str]:
        import bm25s

        return list(bm25s.tokenize([text], stopwords="en", stemmer=self._stemmer, show_progress=False,
                                   return_ids=False)[0])

    def _query_stems(self, snap: Snapshot, text: str) -> list[str]:
        """A question's stems, each word in the spelling the collection uses most ("behaviour" -> "behavior" when
        its abstracts are American, and the other way round)."""
        def respell(match: re.Match[str]) -> str:
            forms = spellings(match.group(0).lower())
            if len(forms) == 1:
                return match.group(0)
            return max(forms, key=lambda form: sum(snap.df.get(stem, 0) for stem in self._stems(form)))

        return self._stems(re.sub(r"[A-Za-z]{4,}", respell, text))

    def _feedback(
        self, snap: Snapshot, topic: str, fused: dict[str, float], k: int, allowed: Allowed | None = None
    ) -> dict[str, float]:
        """Pseudo-relevance feedback for long questions: the dense ranking again, with the query vector moved
        toward the top papers' abstracts (Rocchio). BM25 keeps the question's own words: adding the top papers'
        terms helped CSFCube a little and hurt the dev set at every size (docs/eval.md)."""
        top = sorted(fused, key=fused.__getitem__, reverse=True)[: FEEDBACK_PAPERS]
        vectors = self.index.paper_vectors(top)
        query = np.asarray(self.index.embedder.get_query_embedding(topic))
        if vectors:
            query = query + np.mean([np.asarray(v) for v in vectors.values()], axis=0)
            query /= max(float(np.linalg.norm(query)), 1e-9)
        return self._dense(snap, topic, k, embedding=query.tolist(), allowed=allowed)

    def similarities(self, question: str, doc_ids: list[str]) -> dict[str, float]:
        """Dense cosine similarity of given papers (whole-abstract vectors) to a question."""
        vectors = self.index.paper_vectors(doc_ids)
        query = np.asarray(self.index.embedder.get_query_embedding(topic_query(question)))
        return {d: float(np.dot(query, np.asarray(v))) for d, v in vectors.items()}

    @staticmethod
    def _question_weights(snap: Snapshot, stems: list[str]) -> dict[str, float]:
        """IDF weights of the question's content words (its topic's stems), for `coverage`."""
        if not snap.doc_terms:
            return {}
        return {t: snap.idf(t) for t in set(stems) if len(t) > 2}

    def _cut_forms(self, snap: Snapshot, text: str) -> dict[str, set[str]]:
        """For each of a question's stems, the cut forms of its word that some abstract holds: a word missing its
        last one or two letters ("Speculative Decodin" for "decoding"), not a real word's ending ("process" for
        "processor")."""
        forms: dict[str, set[str]] = {}
        for word in re.findall(r"[a-z]{7,}", text.lower()):
            stem = self._stemmer.stemWord(word)  # as BM25 stems it, without a tokenizer pass per word
            for cut in (1, 2):
                form = word[:-cut]
                if form != stem and form in snap.df and word[-cut:] not in _ENDINGS:
                    forms.setdefault(stem, set()).add(form)
        return forms

    @staticmethod
    def _coverage(snap: Snapshot, doc_id: str, weights: dict[str, float], cut_forms: Mapping[str, set[str]]) -> float:
        """IDF-weighted share of the question's content words that occur in the paper (lexical evidence), a word
        also held by its cut form (`_cut_forms`)."""
        terms = snap.doc_terms.get(doc_id)
        total = sum(weights.values())
        if not terms or total <= 0:
            return 0.0
        return sum(w for t, w in weights.items() if t in terms or not terms.isdisjoint(cut_forms.get(t, ()))) / total

    def count_matching(self, filters: Filters | None) -> int:
        """How many papers pass the filters."""
        allowed = self._snapshot.matching(filters)
        return len(self._snapshot.papers) if allowed is None else len(allowed)

    def retrieve_papers(
        self, question: str, top_k: int | None = None, filters: Filters | None = None
    ) -> list[ScoredPaper]:
        """Papers for a question, best first, with their fused score and best dense similarity; with filters, only
        papers that pass them (searched inside Chroma and BM25, not cut from a short list)."""
        snap = self._snapshot  # one consistent view of the collection for the whole question
        top_k = top_k or self.settings.top_k
        allowed = snap.matching(filters)
        if not snap.ids or (allowed is not None and not len(allowed)):
            return []
        k = max(self.settings.chunk_candidates, top_k)
        mode = self.settings.retrieval
        topic = topic_query(question)
        stems = self._query_stems(snap, topic)
        dense_ranking = self._dense_search(snap, self.index.embedder.get_query_embedding(topic), k, allowed)
        lexical = snap.bm25_scores(stems, k, allowed) if mode != "dense" else {}
        dense = dense_ranking()
        weights = {"dense": 1.0, "bm25": 0.0, "hybrid": self.settings.dense_weight}[mode]
        fused = _fuse(dense, lexical, weights)
        long_question = len(question.split()) > LONG_QUESTION_WORDS
        if long_question and mode == "hybrid" and self.settings.feedback and len(snap.ids) > 2 * FEEDBACK_PAPERS:
            fused = _fuse(self._feedback(snap, topic, fused, k, allowed), lexical, weights)
        # A long question (a pasted abstract, a query by example) names its own concepts, not papers of
        # the collection: there only unmistakable names count (measured on CSFCube, docs/eval.md).
        named = snap.names.find(question, distinctive_only=long_question,
                                usage=Usage(snap.df, len(snap.ids), self._stems))
        if not long_question:
            named += [d for d in snap.unique_names(question, self._stems) if d not in named]
        named = [d for d in named if allowed is None or d in allowed]
        for position, doc_id in enumerate(named):  # first, in the order the question names them
            fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 + 0.1 * (len(named) - position)
        ranked = [d for d in sorted(fused, key=fused.__getitem__, reverse=True) if d in snap.papers][:top_k]
        missing = [d for d in ranked if d not in dense]
        if missing:  # named or BM25-only papers: their similarity still comes from the dense model
            dense.update(self.similarities(topic, missing))
        word_weights = self._question_weights(snap, stems)
        cut_forms = self._cut_forms(snap, topic)
        return [
            ScoredPaper(
                paper=snap.papers[d], score=round(fused[d], 6), similarity=round(dense.get(d, 0.0), 4),
                named=d in named, coverage=round(self._coverage(snap, d, word_weights, cut_forms), 4),
            )
            for d in ranked
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        """The query engine's retrieval: ranked papers as nodes, plus the previous turn's papers for a follow-up."""
        area = isinstance(query_bundle, PaperQuery) and query_bundle.mode in ("summary", "compare")
        # An area (summary, comparison by topic) may hold many papers: grounding decides which are on topic. The
        # counts are the ones the relevance model was fitted with (its rank and shares are among them), not top_k.
        count = self.settings.area_candidates if area else self.settings.ask_candidates
        papers = self.retrieve_papers(query_bundle.query_str, top_k=count,
                                      filters=query_bundle.filters if isinstance(query_bundle, PaperQuery) else None)
        if isinstance(query_bundle, PaperQuery) and query_bundle.carry_over:
            collection = self.papers
            have = {p.paper.doc_id for p in papers}
            filters = query_bundle.filters
            extra = [d for d in query_bundle.carry_over if d not in have and d in collection
                     and (filters is None or filters.matches(collection[d]))]
            sims = self.similarities(query_bundle.carry_over_question, extra) if extra else {}
            papers += [ScoredPaper(paper=collection[d], score=0.0, similarity=sims.get(d, 0.0)) for d in extra]
        return [paper_node(p) for p in papers]
