"""Collections that travel: `rag-bot export` writes one file, `rag-bot import` loads it into any store (a folder or
a real `chroma run` server) without embedding anything, and the imported collection answers as the original."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rag_bot.engine import Engine
from rag_bot.index import PaperIndex
from rag_bot.portable import export_collection, import_collection
from rag_bot.settings import Settings
from tests.test_index import chroma_server  # noqa: F401 - the real `chroma run` fixture

QUESTION = "What does CorrSteer gain on HarmBench?"


@pytest.fixture(scope="module")
def exported(engine, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("export") / "seeds.ragbot.jsonl.gz"
    counts = export_collection(engine.index, path)
    assert counts == {"papers": engine.index.count(), "chunks": engine.index.chunk_count()}
    return path


def test_import_into_a_folder_embeds_nothing_and_answers_the_same(engine, exported, tmp_path):
    index = PaperIndex(Settings(storage=tmp_path / "store"))
    counts = import_collection(index, exported)
    assert counts == {"papers": engine.index.count(), "chunks": engine.index.chunk_count()}
    assert index._embedder is None, "importing loads no embedding model"
    copy = Engine(Settings(storage=tmp_path / "store"))
    original, imported = engine.ask(QUESTION), copy.ask(QUESTION)
    assert imported.answer == original.answer and imported.citations == original.citations
    # importing again replaces, never duplicates
    import_collection(PaperIndex(Settings(storage=tmp_path / "store")), exported)
    assert Engine(Settings(storage=tmp_path / "store")).stats()["papers"] == engine.index.count()


@pytest.mark.slow
def test_import_into_a_chroma_server(engine, exported, tmp_path, chroma_server):  # noqa: F811
    url, _ = chroma_server
    import_collection(PaperIndex(Settings(chroma_url=url, storage=tmp_path / "unused")), exported)
    served = Engine(Settings(chroma_url=url, storage=tmp_path / "unused"))
    assert served.stats()["papers"] == engine.index.count()
    assert served.ask(QUESTION).citations == engine.ask(QUESTION).citations


def test_a_file_that_is_not_a_collection_or_was_embedded_differently_is_refused(tmp_path, exported):
    index = PaperIndex(Settings(storage=tmp_path / "store"))
    junk = tmp_path / "junk.gz"
    junk.write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="not a rag-bot collection"):
        import_collection(index, junk)
    other = tmp_path / "other.gz"
    with gzip.open(exported, "rt") as src, gzip.open(other, "wt") as dst:
        manifest = json.loads(src.readline())
        manifest["index_version"] = "another-model/512"
        dst.write(json.dumps(manifest) + "\n")
    with pytest.raises(ValueError, match="re-ingest the sources"):
        import_collection(index, other)
    assert index.count() == 0, "nothing is written from a refused file"
