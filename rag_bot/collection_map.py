"""A map of the collection: paper vectors projected to 2-D, grouped into topic clusters named by their terms.

The chat's Map tab draws it and its example prompts come from it. Plain numpy: PCA by SVD for the
projection, k-means (k-means++ seeding, a fixed seed) on the unit vectors for the topics, so the same
collection always gives the same map.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rag_bot.text import clean_markup
from rag_bot.types import Paper

log = logging.getLogger(__name__)

CITED = "★ cited in the last answer"
# Words that say nothing about a topic in ML abstracts, on top of English function words.
_STOP = set(
    """a an the of in on for to and or with by from as at is are was were be been being this that these those
    it its their our we they what which who how does do did can could should would may might will about into
    than then there here such more most via each both also only not no but while where when over under
    between across without within through while however thus further first new novel propose proposes
    proposed present presents introduce introduces show shows shown demonstrate demonstrates results result
    approach approaches method methods paper work framework frameworks existing prior recent based using use
    used uses model models learning task tasks data performance state art significantly significant
    experiments experimental extensive achieve achieves achieving improve improves improved improvement
    effective efficient efficiently large problem problems key well specific different various several many
    often even one two three all any other same across strong code available https github com www
    outperforms baselines benchmark benchmarks including include includes address addresses enables enable
    provide provides remain remains however study studies analysis set sets make makes making like lead leads
    high low better best up non typically consistently reveal reveals revealing largely widely commonly current whether yet still limited lack critical crucial important substantial substantially recently require requires required due level levels range wide given able ability ensure ensures leverage leverages addition additional relative pipeline pipelines""".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{2,}")


@dataclass
class CollectionMap:
    """Every paper's 2-D position and topic cluster, with a short label per cluster."""

    doc_ids: list[str]
    titles: list[str]
    sources: list[str]
    xy: np.ndarray
    clusters: np.ndarray
    labels: list[str]
    terms: list[list[str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def members(self, cluster: int) -> list[int]:
        """Row numbers of the papers in a cluster."""
        return [i for i, c in enumerate(self.clusters) if c == cluster]

    def rows(self, highlight: Sequence[str] = ()) -> list[dict[str, object]]:
        """One record per paper (x, y, topic, title, id, source); highlighted papers get the topic `CITED`."""
        marked = set(highlight)
        return [
            {
                "x": round(float(self.xy[i, 0]), 4),
                "y": round(float(self.xy[i, 1]), 4),
                "topic": CITED if doc_id in marked else self.labels[int(self.clusters[i])],
                "title": self.titles[i],
                "id": doc_id,
                "source": self.sources[i],
            }
            for i, doc_id in enumerate(self.doc_ids)
        ]


def project_2d(vectors: np.ndarray) -> np.ndarray:
    """The first two principal components of the rows (PCA by SVD), signs fixed for a stable picture."""
    if len(vectors) == 0:
        return np.zeros((0, 2))
    centred = vectors - vectors.mean(axis=0)
    if len(vectors) < 2 or not np.any(centred):
        return np.zeros((len(vectors), 2))
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:2]
    if axes.shape[0] < 2:
        axes = np.vstack([axes, np.zeros_like(axes[0])])
    xy = centred @ axes.T
    # SVD's sign is arbitrary; make the largest coordinate of each axis positive so the map does not flip.
    for j in range(2):
        if xy[np.argmax(np.abs(xy[:, j])), j] < 0:
            xy[:, j] = -xy[:, j]
    return xy


def choose_k(n: int) -> int:
    """Number of topic clusters for n papers: about sqrt(n/2), between 1 and 12."""
    return max(1, min(12, n, round(math.sqrt(n / 2))))


def kmeans(vectors: np.ndarray, k: int, seed: int = 0, restarts: int = 4, iterations: int = 60) -> np.ndarray:
    """Cluster numbers of the rows by k-means on unit vectors (cosine), best of a few k-means++ starts."""
    n = len(vectors)
    if n == 0:
        return np.zeros(0, dtype=int)
    k = max(1, min(k, n))
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    rng = np.random.default_rng(seed)
    best: tuple[float, np.ndarray] | None = None
    for _ in range(restarts):
        centres = [unit[rng.integers(n)]]
        for _ in range(1, k):
            dist = np.min(((unit[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
            total = dist.sum()
            pick = rng.choice(n, p=dist / total) if total > 0 else rng.integers(n)
            centres.append(unit[pick])
        c = np.array(centres)
        assign = np.zeros(n, dtype=int)
        for _ in range(iterations):
            new = np.argmax(unit @ c.T, axis=1)
            if _ and np.array_equal(new, assign):
                break
            assign = new
            for j in range(k):
                members = unit[assign == j]
                if len(members):
                    mean = members.mean(axis=0)
                    c[j] = mean / max(float(np.linalg.norm(mean)), 1e-12)
        inertia = float(((unit - c[assign]) ** 2).sum())
        if best is None or inertia < best[0]:
            best = (inertia, assign.copy())
    assert best is not None
    # Number clusters by size (largest first) so labels and colours are stable across restarts.
    order = [j for j, _ in Counter(best[1].tolist()).most_common()]
    remap = {old: new for new, old in enumerate(order)}
    return np.array([remap[j] for j in best[1]], dtype=int)


def _words(paper: Paper) -> set[str]:
    """The paper's topic words: content words, and two-word phrases of content words."""
    text = clean_markup(f"{paper.title}. {paper.text}")
    out: set[str] = set()
    for sentence in re.split(r"[.;:!?()\[\],]", text):
        previous = ""
        for word in _WORD.findall(sentence):
            lower = word.lower()
            if lower in _STOP or lower.endswith("ly"):
                previous = ""
                continue
            # Acronyms keep their case (LLM, RL); other words are lower-cased and lightly de-pluralised.
            if word.isupper() and len(word) <= 6:
                term = word
            elif lower.endswith("s") and not lower.endswith(("ss", "us", "is")) and len(lower) > 4:
                term = lower[:-1]
            else:
                term = lower
            out.add(term)
            if previous:
                out.add(f"{previous} {term}")
            previous = term
    return out


def cluster_terms(papers: Sequence[Paper], clusters: np.ndarray, n_terms: int = 3) -> list[list[str]]:
    """The terms that set each cluster apart: shared by many of its papers, rare in the rest (TF-IDF-like)."""
    bags = [_words(p) for p in papers]
    everywhere = Counter(w for bag in bags for w in bag)
    n = len(papers)
    out: list[list[str]] = []
    for j in range(int(clusters.max()) + 1 if n else 0):
        idx = [i for i in range(n) if clusters[i] == j]
        inside = Counter(w for i in idx for w in bags[i])
        size = len(idx)

        def weight(term: str, inside: Counter[str] = inside, size: int = size) -> float:
            share = inside[term] / size
            # Phrases name topics better than single words ("federated lora" over "federated").
            return share * math.log((n + 1) / everywhere[term]) * (1.3 if " " in term else 1.0)

        candidates = [w for w, c in inside.items() if c >= min(2, size)]
        chosen: list[str] = []
        for term in sorted(candidates, key=lambda w: (-weight(w), w)):
            words = set(term.split(" "))
            # A term that repeats a word of one already chosen adds little ("federated" after "federated lora").
            if any(words & set(c.split(" ")) for c in chosen):
                continue
            chosen.append(term)
            if len(chosen) == n_terms:
                break
        out.append(chosen)
    return out


def build_map(papers: Sequence[Paper], vectors: dict[str, list[float]]) -> CollectionMap:
    """The map of the papers that have a vector."""
    kept = [p for p in papers if p.doc_id in vectors]
    kept.sort(key=lambda p: p.doc_id)
    if not kept:
        return CollectionMap([], [], [], np.zeros((0, 2)), np.zeros(0, dtype=int), [], [])
    matrix = np.array([vectors[p.doc_id] for p in kept], dtype=float)
    clusters = kmeans(matrix, choose_k(len(kept)))
    log.debug("map: %d papers in %d topics", len(kept), len(set(clusters.tolist())))
    terms = cluster_terms(kept, clusters)
    labels = []
    for j, words in enumerate(terms):
        label = ", ".join(words) or f"topic {j + 1}"
        labels.append(f"{j + 1}. {label}")
    return CollectionMap(
        doc_ids=[p.doc_id for p in kept],
        titles=[clean_markup(p.title) for p in kept],
        sources=[p.source for p in kept],
        xy=project_2d(matrix),
        clusters=clusters,
        labels=labels,
        terms=terms,
    )
