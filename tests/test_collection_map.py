"""The collection map: 2-D projection, topic clusters and their labels."""

from __future__ import annotations

import numpy as np

from rag_bot.collection_map import CITED, build_map, choose_k, kmeans, project_2d
from rag_bot.types import Paper


def test_projection_keeps_the_main_spread_and_is_stable() -> None:
    rng = np.random.default_rng(1)
    points = rng.normal(size=(50, 8)) * np.array([10, 3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1])
    xy = project_2d(points)
    assert xy.shape == (50, 2)
    assert xy[:, 0].std() > xy[:, 1].std() > 1.0
    assert np.allclose(xy, project_2d(points))
    assert project_2d(np.zeros((0, 8))).shape == (0, 2)
    assert np.allclose(project_2d(np.ones((3, 4))), 0)


def test_kmeans_finds_separated_groups() -> None:
    rng = np.random.default_rng(2)
    centres = np.eye(6)[:3] * 5
    points = np.vstack([c + rng.normal(scale=0.2, size=(10, 6)) for c in centres])
    labels = kmeans(points, 3)
    groups = [set(labels[i * 10:(i + 1) * 10].tolist()) for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 3
    assert choose_k(38) == 4 and choose_k(1) == 1 and choose_k(100000) == 12


def test_seed_map_has_labelled_topics_and_highlights_citations(engine) -> None:
    papers = engine.index.all_papers()
    cmap = build_map(papers, engine.index.paper_vectors([p.doc_id for p in papers]))
    assert len(cmap) == 38 and len(cmap.labels) == 4
    assert all(len(terms) == 3 for terms in cmap.terms)
    # The two federated-LoRA papers share a topic, and its label says so.
    lora = [i for i, t in enumerate(cmap.titles) if "LoRA" in t and "ederated" in t]
    assert len(lora) >= 2 and len({int(cmap.clusters[i]) for i in lora}) == 1
    assert "federated lora" in cmap.labels[int(cmap.clusters[lora[0]])].lower()
    rows = cmap.rows(highlight=[cmap.doc_ids[0]])
    assert rows[0]["topic"] == CITED and all(r["topic"] != CITED for r in rows[1:])
    assert {"x", "y", "title", "id", "source"} <= set(rows[0])


def test_tiny_collections_still_map() -> None:
    paper = Paper(doc_id="a", title="Only one", text="A single abstract about graph neural networks.", source="x")
    cmap = build_map([paper], {"a": [0.1] * 4})
    assert len(cmap) == 1 and len(cmap.labels) == 1
    assert len(build_map([], {})) == 0
