"""The collection map: 2-D projection, topic clusters and their labels."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_bot.surfaces.collection_map import build_map, choose_k, kmeans, project_2d
from rag_bot.types import Paper
from tests.conftest import SEEDS


@pytest.fixture(scope="module")
def seed_list_small() -> list[Paper]:
    from rag_bot.reading.corpus import read_paths

    return read_paths([SEEDS]).papers


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
    # Topics are named by two noun phrases, never by an adverb or a lone adjective.
    for label in cmap.labels:
        number, names = label.split(". ", 1)
        assert number.isdigit() and 1 <= len(names.split(" · ")) <= 2
        assert not any(word.endswith("ly") for word in names.split())


def test_tiny_collections_still_map() -> None:
    paper = Paper(doc_id="a", title="Only one", text="A single abstract about graph neural networks.", source="x")
    cmap = build_map([paper], {"a": [0.1] * 4})
    assert len(cmap) == 1 and len(cmap.labels) == 1
    assert len(build_map([], {})) == 0


def test_the_map_of_a_store_is_saved_and_recomputed_when_the_collection_changes(tmp_path, seed_list_small) -> None:
    """`map_of`: computed once per collection state and saved beside the store; a start reads it back (the same
    map); an ingest changes the state, and the map is computed again with the new paper."""
    from rag_bot.settings import Settings
    from rag_bot.store.embedding import MiniLMEmbedding
    from rag_bot.store.index import PaperIndex
    from rag_bot.surfaces.collection_map import cached_map, map_of

    embedder = MiniLMEmbedding()
    index = PaperIndex(Settings(storage=tmp_path), embedder=embedder)
    index.ingest(seed_list_small[:8])
    assert cached_map(index) is None
    first = map_of(index)
    assert len(first) == 8 and (tmp_path / "map").is_dir()
    again = cached_map(PaperIndex(Settings(storage=tmp_path), embedder=embedder))
    assert again is not None
    assert (again.doc_ids, again.titles, again.labels, again.terms) == (first.doc_ids, first.titles, first.labels,
                                                                        first.terms)
    # What the page shows of each paper comes from the map: its venue and year are saved too.
    by_id = {p.doc_id: p for p in seed_list_small[:8]}
    assert again.venues == first.venues == [by_id[d].venue or "" for d in first.doc_ids]
    assert again.years == first.years == [by_id[d].year for d in first.doc_ids]
    assert np.allclose(again.xy, first.xy, atol=1e-5) and np.array_equal(again.clusters, first.clusters)
    index.ingest(seed_list_small[:9])
    assert cached_map(index) is None
    assert len(map_of(index)) == 9


def test_large_collections_are_clustered_on_a_sample_and_every_paper_assigned() -> None:
    rng = np.random.default_rng(5)
    centres = np.eye(6)[:3] * 5
    points = np.vstack([c + rng.normal(scale=0.2, size=(40, 6)) for c in centres])
    labels = kmeans(points, 3, fit_sample=20)
    groups = [set(labels[i * 40:(i + 1) * 40].tolist()) for i in range(3)]
    assert all(len(g) == 1 for g in groups) and len(set.union(*groups)) == 3
    assert np.array_equal(labels, kmeans(points, 3, fit_sample=20))  # the same collection, the same map


def test_a_saved_map_of_an_older_format_is_computed_again(tmp_path, seed_list_small, caplog) -> None:
    """A map saved before venues and years were (format 1: under its own key, or at the current key by an older
    build), or by the release before the shared cache helper (format 3, keyed with the lexical cache's format 6), is
    neither used nor crashed on: the map is computed again, saved in the current format, and the old saves
    removed."""
    import hashlib
    import json

    from rag_bot.settings import Settings
    from rag_bot.store.caches import DerivedCache
    from rag_bot.store.embedding import MiniLMEmbedding
    from rag_bot.store.index import PaperIndex
    from rag_bot.surfaces.collection_map import MAP, cached_map, map_folder, map_of

    index = PaperIndex(Settings(storage=tmp_path), embedder=MiniLMEmbedding())
    index.ingest(seed_list_small[:6])
    fresh = map_of(index)
    folder = map_folder(index, index.state())

    def make_old(target: Path) -> None:
        if target != folder:
            shutil.copytree(folder, target)
        meta = json.loads((target / "map.json").read_text(encoding="utf-8"))
        del meta["venues"], meta["years"]
        (target / "map.json").write_text(json.dumps(meta | {"format": 1}), encoding="utf-8")

    assert MAP.format > 1
    old_key = DerivedCache("map", 1).folder(index, index.state())
    make_old(old_key)
    last_release = json.dumps(index.state() | {"map_format": 3, "format": 6}, sort_keys=True)
    shutil.copytree(folder, folder.parent / hashlib.sha256(last_release.encode()).hexdigest()[:20])
    make_old(folder)
    assert cached_map(index) is None and "could not be read" in caplog.text
    again = map_of(index)
    assert again.doc_ids == fresh.doc_ids and again.venues == fresh.venues and again.years == fresh.years
    assert [f.name for f in folder.parent.iterdir()] == [folder.name]
    assert json.loads((folder / "map.json").read_text(encoding="utf-8"))["format"] == MAP.format
    assert cached_map(index) is not None


def test_the_plotted_sample_is_bounded_spread_and_keeps_the_cited_papers(engine) -> None:
    from rag_bot.surfaces.ui.map import map_svg
    from rag_bot.surfaces.ui.render import map_label, map_legend

    papers = engine.index.all_papers()
    cmap = build_map(papers, engine.index.paper_vectors([p.doc_id for p in papers]))
    assert cmap.sample(100) == list(range(38)) and cmap.sample(0) == []
    spread = cmap.sample(10)
    assert len(spread) == 10 and spread[0] == 0 and spread[-1] == 37
    assert max(b - a for a, b in zip(spread, spread[1:])) <= 5  # evenly spread over the 38
    cited = [cmap.doc_ids[i] for i in (1, 2) if i not in spread]
    assert cited
    rows = cmap.sample(10, [*cited, "not-a-paper"])
    assert rows == sorted(set(spread) | {cmap.row_of(d) for d in cited}) == cmap.sample(10, cited)
    svg = map_svg(cmap, cited, limit=10)
    assert svg.count("<circle") == 10 and set(re.findall(r'class="cited"[^>]*data-id="([^"]+)"', svg)) == set(cited)
    label = map_label(10 + len(cited), len(cmap))
    assert label.endswith(f"· {10 + len(cited)} of 38 papers shown") and "·" not in map_label(38, 38)
    assert sum(int(n) for n in re.findall(r"\((\d+)\)", map_legend(cmap))) == 38  # counts are of every paper
    assert map_svg(cmap).count("<circle") == 38 and cmap.row_of(cmap.doc_ids[5]) == 5 and cmap.row_of("zz") is None


def test_the_drawn_map_names_its_topics_where_they_are_and_titles_every_point(engine) -> None:
    """Each topic's name is written at the centre of its papers, every point carries its paper's title (shown on
    hover) and id (opened on click), titles are escaped, and nothing draws an axis."""
    import html

    from rag_bot.surfaces.ui.map import map_svg, topic_name

    papers = engine.index.all_papers()
    cmap = build_map(papers, engine.index.paper_vectors([p.doc_id for p in papers]))
    svg = map_svg(cmap)
    points = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"[^>]*data-id="([^"]+)"><title>([^<]+)</title>', svg)
    assert len(points) == 38
    assert {html.unescape(t).split(" · ")[0] for *_, t in points} == set(cmap.titles)
    drawn = {html.unescape(doc_id): (float(x), float(y)) for x, y, doc_id, _ in points}
    for topic, label in enumerate(cmap.labels):
        x, y = (float(v) for v in re.search(
            rf'<text class="topic-name" x="(-?[\d.]+)" y="(-?[\d.]+)"[^>]*>{re.escape(html.escape(topic_name(label)))}<',
            svg).groups())
        mine = [drawn[doc_id] for doc_id, cluster in zip(cmap.doc_ids, cmap.clusters) if cluster == topic]
        assert np.allclose((x, y), np.median(mine, axis=0), atol=1.0)
    assert "axis" not in svg.lower() and "component" not in svg.lower()
