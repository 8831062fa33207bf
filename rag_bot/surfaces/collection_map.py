"""A map of the collection: paper vectors projected to 2-D, grouped into topic clusters named by their terms.

The chat's Map tab draws it and its example prompts come from it. Plain numpy: PCA (eigenvectors of the
covariance) for the projection, k-means (k-means++ seeding, a fixed seed) on the unit vectors for the topics, so
the same collection always gives the same map. Past `FIT_SAMPLE` papers the clusters are fitted on an evenly
spread sample and every paper is then assigned to its nearest centre; past `TERM_SAMPLE` papers per topic, its
terms are counted on an evenly spread sample of them.

`map_of(index)` is the map of a stored collection, computed once per collection state and saved beside the
store (`<storage>/map/<collection>/<key>/`, a derived cache: rag_bot/store/caches.py): a start reads the saved
layout (no paper vector, no record read); `cached_map(index)` returns it only when it is saved. It holds each
paper's title, source, venue and year too, so the chat builds its page (paper table, filter choices) from the map
without decoding a paper.
"""

from __future__ import annotations

import json
import logging
import math
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rag_bot.store.caches import DerivedCache
from rag_bot.surfaces.topic_names import cluster_terms
from rag_bot.text import clean_markup
from rag_bot.types import Paper

if TYPE_CHECKING:
    from rag_bot.store.base import StoreState
    from rag_bot.store.index import PaperIndex


log = logging.getLogger(__name__)

FIT_SAMPLE = 4000  # papers k-means is fitted on (evenly spread); all papers are then assigned
# 2: venues and years saved; 3: topics named by noun phrases; 4: keyed by its own format alone (it was keyed by the
# lexical cache's too). Bump when what is saved, or how the map is computed, changes.
MAP = DerivedCache("map", format=4)


@dataclass
class CollectionMap:
    """Every paper's 2-D position and topic cluster, with a short label per cluster; rows are sorted by doc_id and
    hold each paper's title (markup cleaned), source file, venue ("" when unknown) and year."""

    doc_ids: list[str]
    titles: list[str]
    sources: list[str]
    venues: list[str]
    years: list[int | None]
    xy: np.ndarray
    clusters: np.ndarray
    labels: list[str]
    terms: list[list[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def members(self, cluster: int) -> list[int]:
        """Row numbers of the papers in a cluster."""
        return np.flatnonzero(self.clusters == cluster).tolist()

    def sizes(self) -> list[int]:
        """How many papers each cluster holds, by cluster number."""
        return np.bincount(self.clusters.astype(int), minlength=len(self.labels)).tolist()

    def row_of(self, doc_id: str) -> int | None:
        """The row of a paper (the rows are sorted by doc_id), None when the map does not hold it."""
        i = bisect_left(self.doc_ids, doc_id)
        return i if i < len(self.doc_ids) and self.doc_ids[i] == doc_id else None

    def sample(self, limit: int, keep: Sequence[str] = ()) -> list[int]:
        """Rows of at most `limit` papers evenly spread over the map (every row when it holds no more), plus the
        rows of the `keep` papers; in row order, so the same map and `keep` always give the same rows."""
        n = len(self)
        spread = range(n) if n <= limit else np.linspace(0, n - 1, max(limit, 0)).round().astype(int).tolist()
        kept = (self.row_of(doc_id) for doc_id in keep)
        return sorted(set(spread) | {i for i in kept if i is not None})


def project_2d(vectors: np.ndarray) -> np.ndarray:
    """The first two principal components of the rows (PCA by SVD), signs fixed for a stable picture."""
    if len(vectors) == 0:
        return np.zeros((0, 2))
    centred = np.asarray(vectors, dtype=np.float64)
    centred = centred - centred.mean(axis=0)
    if len(vectors) < 2 or not np.any(centred):
        return np.zeros((len(vectors), 2))
    axes = _principal_axes(centred.T @ centred)
    if axes.shape[0] < 2:
        axes = np.vstack([axes, np.zeros_like(axes[0])])
    xy = centred @ axes.T
    # SVD's sign is arbitrary; make the largest coordinate of each axis positive so the map does not flip.
    for j in range(2):
        if xy[np.argmax(np.abs(xy[:, j])), j] < 0:
            xy[:, j] = -xy[:, j]
    return xy


def separate_topics(vectors: np.ndarray, clusters: np.ndarray) -> np.ndarray:
    """2-D positions that keep topics apart: the two leading discriminant axes of the clusters (Fisher's linear
    discriminant: most spread between topic centres for the spread within them), PCA when there are fewer than
    three topics. The within-topic scatter is shrunk so that 384 dimensions fitted on a few papers stay well
    posed."""
    k = int(clusters.max()) + 1 if len(clusters) else 0
    if k < 3 or len(vectors) <= k:
        return project_2d(vectors)
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    mean = x.mean(axis=0)
    centres = np.stack([x[clusters == j].mean(axis=0) for j in range(k)])
    sizes = np.bincount(clusters, minlength=k).astype(np.float64)
    within = x - centres[clusters]
    sw = within.T @ within / len(x)
    # Shrinkage towards a scaled identity, the more the fewer papers per dimension (d / (n + d)): 0.91 for the
    # 38 seeds (nearly the axes of the topic centres), 0.11 at 3,202 papers, 0.02 at 22,186.
    shrink = len(sw) / (len(x) + len(sw))
    sw = (1 - shrink) * sw + shrink * np.trace(sw) / len(sw) * np.eye(len(sw))
    between = ((centres - mean).T * sizes) @ (centres - mean) / len(x)
    # Whiten by the within-topic scatter, then the principal axes of the between-topic scatter.
    values, vectors_w = np.linalg.eigh(sw)
    whiten = vectors_w / np.sqrt(np.maximum(values, 1e-12))
    axes = _principal_axes(whiten.T @ between @ whiten)
    xy = (x - mean) @ (whiten @ axes.T)
    for j in range(2):  # a fixed orientation, as project_2d
        if xy[np.argmax(np.abs(xy[:, j])), j] < 0:
            xy[:, j] = -xy[:, j]
    return np.asarray(xy)


def _principal_axes(cov: np.ndarray, rank: int = 2, width: int = 6, steps: int = 60) -> np.ndarray:
    """The `rank` leading eigenvectors (rows) of a symmetric matrix: subspace iteration from a fixed start, then
    the eigenvectors of the small projected matrix (cheaper than a full eigendecomposition of a 384 x 384)."""
    d = len(cov)
    if d <= width:
        values, vectors = np.linalg.eigh(cov)
        return np.asarray(vectors[:, np.argsort(values)[::-1][:rank]].T)
    basis = np.linalg.qr(np.random.default_rng(0).standard_normal((d, width)))[0]
    for _ in range(steps):
        basis = np.linalg.qr(cov @ basis)[0]
    values, small = np.linalg.eigh(basis.T @ cov @ basis)
    return np.asarray((basis @ small[:, np.argsort(values)[::-1][:rank]]).T)


def choose_k(n: int) -> int:
    """Number of topic clusters for n papers: about sqrt(n/2), between 1 and 12."""
    return max(1, min(12, n, round(math.sqrt(n / 2))))


def kmeans(vectors: np.ndarray, k: int, seed: int = 0, restarts: int = 4, iterations: int = 60,
           fit_sample: int = FIT_SAMPLE) -> np.ndarray:
    """Cluster numbers of the rows by k-means on unit vectors (cosine), best of a few k-means++ starts; past
    `fit_sample` rows the centres are fitted on an evenly spread sample, then every row takes its nearest."""
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=int)
    k = max(1, min(k, n))
    unit = np.asarray(vectors, dtype=np.float32)
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), np.float32(1e-12))
    fit = unit if n <= fit_sample else unit[np.linspace(0, n - 1, fit_sample).round().astype(int)]
    m = len(fit)
    rng = np.random.default_rng(seed)
    best: tuple[float, np.ndarray] | None = None
    for _ in range(restarts):
        first = fit[rng.integers(m)]
        centres = [first]
        # Squared distance of each row to its nearest centre so far (unit vectors: 2 - 2 cos).
        nearest = np.maximum(2.0 - 2.0 * (fit @ first), 0.0)
        for _ in range(1, k):
            total = nearest.sum()
            pick = rng.choice(m, p=nearest / total) if total > 0 else rng.integers(m)
            centres.append(fit[pick])
            nearest = np.minimum(nearest, np.maximum(2.0 - 2.0 * (fit @ fit[pick]), 0.0))
        c = np.array(centres)
        assign = np.zeros(m, dtype=int)
        for step in range(iterations):
            new = np.argmax(fit @ c.T, axis=1)
            if step and np.array_equal(new, assign):
                break
            assign = new
            sums = (assign[:, None] == np.arange(k)[None, :]).astype(fit.dtype).T @ fit
            norms = np.linalg.norm(sums, axis=1)
            filled = norms > 1e-12  # an empty cluster keeps its centre
            c[filled] = sums[filled] / norms[filled, None]
        inertia = float(2.0 * m - 2.0 * np.einsum("ij,ij->", fit, c[assign], dtype=np.float64))
        if best is None or inertia < best[0]:
            best = (inertia, c.copy())
    assert best is not None
    labels = np.argmax(unit @ best[1].T, axis=1)
    # Number clusters by size (largest first) so labels and colours are stable across restarts.
    order = [j for j, _ in Counter(labels.tolist()).most_common()]
    remap = {old: new for new, old in enumerate(order)}
    return np.array([remap[j] for j in labels.tolist()], dtype=int)


def build_map(papers: Sequence[Paper], vectors: Mapping[str, Sequence[float] | np.ndarray]) -> CollectionMap:
    """The map of the papers that have a vector."""
    kept = sorted((p for p in papers if p.doc_id in vectors), key=lambda p: p.doc_id)
    if not kept:
        return empty_map()
    matrix = np.array([np.asarray(vectors[p.doc_id], dtype=np.float32) for p in kept], dtype=np.float32)
    return _layout(kept, matrix)


def empty_map() -> CollectionMap:
    return CollectionMap(doc_ids=[], titles=[], sources=[], venues=[], years=[], xy=np.zeros((0, 2)),
                         clusters=np.zeros(0, dtype=int), labels=[], terms=[])


def _layout(kept: Sequence[Paper], matrix: np.ndarray) -> CollectionMap:
    """The map of papers sorted by doc_id, row n of `matrix` being paper n's vector."""
    started = time.perf_counter()
    clusters = kmeans(matrix, choose_k(len(kept)))
    terms = cluster_terms(kept, clusters)
    labels = []
    for j, words in enumerate(terms):
        label = " · ".join(words[:2]) or f"topic {j + 1}"  # two phrases name a topic; all three are kept
        labels.append(f"{j + 1}. {label}")
    cmap = CollectionMap(
        doc_ids=[p.doc_id for p in kept],
        titles=[clean_markup(p.title) for p in kept],
        sources=[p.source for p in kept],
        venues=[p.venue or "" for p in kept],
        years=[p.year for p in kept],
        xy=separate_topics(matrix, clusters),
        clusters=clusters,
        labels=labels,
        terms=terms,
    )
    log.info("map: %d papers in %d topics (%.1f s)", len(kept), len(labels), time.perf_counter() - started)
    return cmap


# --- the map of a stored collection, saved beside the store ----------------------------------------------------
def map_folder(index: PaperIndex, state: StoreState) -> Path:
    """Where the map of a collection state is saved."""
    return MAP.folder(index, state)


def cached_map(index: PaperIndex) -> CollectionMap | None:
    """The saved map of the collection's current state, or None when there is none (or it cannot be read)."""
    state = index.state()
    if not state["papers"]:
        return empty_map()
    folder = map_folder(index, state)
    if not MAP.saved(folder):
        return None
    try:
        meta = json.loads((folder / "map.json").read_text(encoding="utf-8"))
        with np.load(folder / "map.npz", allow_pickle=False) as arrays:
            xy, clusters = arrays["xy"].astype(np.float64), arrays["clusters"].astype(int)
        if meta.get("format") != MAP.format:
            raise ValueError(f"the saved map is of format {meta.get('format')}, not {MAP.format}")
        cmap = CollectionMap(doc_ids=meta["doc_ids"], titles=meta["titles"], sources=meta["sources"],
                             venues=meta["venues"], years=meta["years"], xy=xy, clusters=clusters,
                             labels=meta["labels"], terms=meta["terms"])
        columns = (cmap.doc_ids, cmap.titles, cmap.sources, cmap.venues, cmap.years, xy, clusters)
        if len({len(column) for column in columns}) != 1:
            raise ValueError("the saved map's parts differ in length")
    except Exception:  # a damaged, partial or older save: computed again
        log.warning("the saved map in %s could not be read; computing it again", folder, exc_info=True)
        return None
    log.info("map of %d papers loaded from %s", len(cmap), folder)
    return cmap


def map_of(index: PaperIndex, papers: Mapping[str, Paper] | None = None) -> CollectionMap:
    """The map of the stored collection: the saved one of its current state, else computed (from `papers`, the
    collection by doc_id when the caller holds it, else read from the store) and saved. Nothing is saved while
    an ingest is writing (or after one was killed)."""
    cmap = cached_map(index)
    if cmap is not None:
        return cmap
    state = index.state()
    ids, matrix = index.paper_matrix()
    if papers is None:
        papers = {p.doc_id: p for p in index.all_papers()}
    order = sorted(range(len(ids)), key=ids.__getitem__)
    kept = [papers[ids[i]] for i in order if ids[i] in papers]
    rows = [i for i in order if ids[i] in papers]
    cmap = _layout(kept, matrix[rows]) if kept else empty_map()
    if not str(state.get("generation") or "").startswith("writing-") and kept:
        # A save there that `cached_map` could not use (damaged, or of an older build) is replaced.
        try:
            with MAP.stage(map_folder(index, state)) as tmp:
                _write(tmp, cmap)
        except OSError as exc:  # a full disk: the map is still shown, computed again at the next start
            log.warning("could not save the map: %s", exc)
    return cmap


def _write(tmp: Path, cmap: CollectionMap) -> None:
    """Write the map's files into a folder."""
    np.savez(tmp / "map.npz", xy=cmap.xy.astype(np.float32), clusters=cmap.clusters.astype(np.int32))
    (tmp / "map.json").write_text(json.dumps({
        "doc_ids": cmap.doc_ids, "titles": cmap.titles, "sources": cmap.sources, "venues": cmap.venues,
        "years": cmap.years, "labels": cmap.labels, "terms": cmap.terms, "format": MAP.format,
    }, ensure_ascii=False), encoding="utf-8")
