"""The lexical cache (rag_bot/retrieval/lexical/): used when the collection is as it was saved, rebuilt when it
changed, is damaged or is of an older format, and the same retrieval either way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_bot.reading.corpus import read_paths
from rag_bot.retrieval.lexical import LexicalCache
from rag_bot.retrieval.lexical.cache import LEXICAL
from rag_bot.retrieval.retrieve import PaperRetriever
from rag_bot.settings import Settings
from rag_bot.store.caches import DerivedCache
from rag_bot.store.embedding import MiniLMEmbedding
from rag_bot.store.index import PaperIndex
from tests.conftest import SEEDS


@pytest.fixture(scope="module")
def seed_list():
    return read_paths([SEEDS]).papers


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedding:
    return MiniLMEmbedding()


def _retriever(storage: Path, embedder: MiniLMEmbedding) -> tuple[PaperIndex, PaperRetriever]:
    settings = Settings(storage=storage)
    index = PaperIndex(settings, embedder=embedder)
    return index, PaperRetriever(index, settings)


def _origin(caplog: pytest.LogCaptureFixture) -> str:
    return next(r.getMessage() for r in reversed(caplog.records) if "retriever loaded" in r.getMessage())


def test_cache_is_used_then_invalidated_by_an_ingest(tmp_path: Path, seed_list, embedder, caplog) -> None:
    caplog.set_level("INFO", logger="rag_bot.retrieval.retrieve")
    papers = seed_list[:6]
    index, built = _retriever(tmp_path, embedder)
    index.ingest(papers)
    built.reload()
    assert "built lexicon" in _origin(caplog)
    question = papers[2].title
    expected = [(p.paper.doc_id, p.score, p.coverage) for p in built.retrieve_papers(question)]

    _, cached = _retriever(tmp_path, embedder)
    assert "cache lexicon" in _origin(caplog)
    assert [(p.paper.doc_id, p.score, p.coverage) for p in cached.retrieve_papers(question)] == expected
    assert cached.papers[papers[2].doc_id] == papers[2]
    assert set(cached.papers) == {p.doc_id for p in papers}

    # Same number of papers, one abstract changed: the old cache must not be used.
    changed = papers[1].model_copy(update={"text": papers[1].text + " Zyxwvut is the new word."})
    index.ingest([*papers[:1], changed, *papers[2:]])
    _, after = _retriever(tmp_path, embedder)
    assert "built lexicon" in _origin(caplog)
    found = after.retrieve_papers("Which paper mentions zyxwvut?")
    assert found[0].paper.doc_id == changed.doc_id and found[0].coverage > found[1].coverage, "the new word is searched"
    assert after.papers[changed.doc_id].text == changed.text
    assert len(list(LEXICAL.root(index).iterdir())) == 1, "caches of older states are removed"


def test_damaged_cache_is_rebuilt(tmp_path: Path, seed_list, embedder, caplog) -> None:
    caplog.set_level("INFO", logger="rag_bot.retrieval.retrieve")
    index, _ = _retriever(tmp_path, embedder)
    index.ingest(seed_list[:4])
    _retriever(tmp_path, embedder)  # saves the cache
    folder = next(LEXICAL.root(index).iterdir())
    (folder / "vocab.json").write_text("{not json")
    _, again = _retriever(tmp_path, embedder)
    assert "built lexicon" in _origin(caplog)
    assert again.retrieve_papers(seed_list[0].title)[0].paper.doc_id == seed_list[0].doc_id
    _retriever(tmp_path, embedder)
    assert "cache lexicon" in _origin(caplog), "the damaged cache was replaced, not rebuilt at every start"
    shutil.rmtree(LEXICAL.root(index))
    _, fresh = _retriever(tmp_path, embedder)
    assert "built lexicon" in _origin(caplog)
    assert len(fresh.papers) == 4


def test_stats_from_the_saved_columns_equal_stats_from_every_record(tmp_path: Path, seed_list, embedder) -> None:
    from rag_bot.engine import Engine

    index, _ = _retriever(tmp_path, embedder)
    index.ingest([*seed_list[:5], *(p.model_copy(update={"source": "other.jsonl"}) for p in seed_list[5:8])])
    shutil.rmtree(LEXICAL.root(index), ignore_errors=True)
    scanned = Engine(Settings(storage=tmp_path)).stats()  # no cache: every record read
    assert LexicalCache(index).cached() is None
    _retriever(tmp_path, embedder)  # saves the cache
    assert LexicalCache(index).cached() is not None
    from_columns = Engine(Settings(storage=tmp_path)).stats()
    assert from_columns == scanned and from_columns["sources"]["other.jsonl"] == 3
    assert sum(from_columns["sources"].values()) == 8


def test_a_lexicon_built_a_page_at_a_time_retrieves_as_one_built_at_once(tmp_path: Path, seed_list, embedder) -> None:
    """The build reads and tokenises the store a page at a time (its memory does not hold every paper's text):
    pages of 5 papers give the same words, word counts, BM25 scores and answers as one page of all 38."""
    index, _ = _retriever(tmp_path / "store", embedder)
    index.ingest(seed_list)
    state = index.state()
    paged = tmp_path / "paged"
    for folder, page in ((tmp_path / "whole", len(seed_list)), (paged, 5)):
        folder.mkdir()
        assert LexicalCache(index, page=page).write(folder, None, state) == len(seed_list)
    whole, parts = (LexicalCache.read(tmp_path / name, state) for name in ("whole", "paged"))
    assert list(whole.ids) == list(parts.ids) and whole.names == parts.names
    assert dict(whole.df) == dict(parts.df) and len(whole.df) > 1000
    assert {d: whole.doc_terms[d] for d in whole.ids} == {d: parts.doc_terms[d] for d in parts.ids}
    for paper in seed_list:
        words = sorted(whole.doc_terms[paper.doc_id])[:6]
        assert list(whole.bm25.get_scores(words)) == list(parts.bm25.get_scores(words))
        assert parts.papers[paper.doc_id] == paper
    assert [parts.columns.counts(f) for f in ("venue", "source")] == [whole.columns.counts(f) for f in ("venue",
                                                                                                       "source")]


def test_a_saved_cache_is_readable_like_the_store_beside_it(tmp_path: Path, seed_list, embedder) -> None:
    """Built in a private temporary folder, the cache is renamed into place with a folder's usual permissions (a
    store shared by a lab's users is read by all of them)."""
    index, _ = _retriever(tmp_path, embedder)
    index.ingest(seed_list[:3])
    _retriever(tmp_path, embedder)
    folder = next(LEXICAL.root(index).iterdir())
    assert folder.stat().st_mode & 0o777 == 0o755


def test_a_cache_of_an_older_format_is_rebuilt_and_removed(tmp_path: Path, seed_list, embedder, caplog) -> None:
    """A cache saved by an older release (format 5, under its own key) is never read: the start builds the current
    format, answers the same, and the old save is removed."""
    caplog.set_level("INFO", logger="rag_bot.retrieval.retrieve")
    index, first = _retriever(tmp_path, embedder)
    index.ingest(seed_list[:4])
    first.reload()
    current = LEXICAL.folder(index, index.state())
    older = DerivedCache("lexicon", LEXICAL.format - 1).folder(index, index.state())
    current.rename(older)
    meta = json.loads((older / "meta.json").read_text(encoding="utf-8"))
    (older / "meta.json").write_text(json.dumps(meta | {"format": LEXICAL.format - 1}), encoding="utf-8")
    _, again = _retriever(tmp_path, embedder)
    assert "built lexicon" in _origin(caplog)
    assert again.retrieve_papers(seed_list[2].title)[0].paper.doc_id == seed_list[2].doc_id
    assert [f.name for f in LEXICAL.root(index).iterdir()] == [current.name]
