"""A paper's record as stored: its text in its metadata (long strings in pieces), read back whole, from stores
written by older versions too, and exported in the portable format every version reads."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from rag_bot.reading.records import make_paper
from rag_bot.settings import Settings
from rag_bot.store.index import PaperIndex
from rag_bot.store.portable import export_collection, import_collection
from rag_bot.store.records import PIECE, joined, paper_metadata, spread
from tests.store.test_index import chroma_server  # noqa: F401 (a `chroma run` server on loopback)

# Text in several scripts, so pieces are cut next to multi-byte characters (2, 3 and 4 bytes in UTF-8).
LONG = " ".join(f"Sentence {n} about sparse autoencoders, Größe, 稀疏 features 🧪." for n in range(120))


def _index(storage: Path, embedder) -> PaperIndex:
    return PaperIndex(Settings(storage=storage), embedder=embedder)


def test_long_strings_are_stored_in_pieces_that_join_back_exactly() -> None:
    meta = {"text": LONG, "title": "Short", "year": 2026, "authors": json.dumps(["A. Author"] * 80)}
    stored = spread(meta)
    assert stored["text:pieces"] > 1 and stored["authors:pieces"] > 1 and stored["title:pieces"] is None
    assert all(len(v.encode("utf-8")) <= PIECE for v in stored.values() if isinstance(v, str))
    assert joined(stored) == meta
    assert joined({"title": "as an older version wrote it", "year": 2020}) == {"title": "as an older version wrote it",
                                                                                "year": 2020}


def test_a_paper_is_stored_without_a_chroma_document_and_read_back_whole(tmp_path: Path, embedder) -> None:
    index = _index(tmp_path, embedder)
    paper = make_paper("long#1", LONG, "long.txt", title="A long abstract")
    index.ingest([paper])
    got = index.papers.get(ids=["long#1"], include=["documents", "metadatas"])
    assert got["documents"] == [None], "the text is not Chroma's document (no full-text index of it)"
    assert index.papers_by_id(["long#1"])[0].text == paper.text
    # Chroma keeps no full-text index entry for it: the FTS table holds nothing.
    db = sqlite3.connect(tmp_path / "chroma.sqlite3")
    assert db.execute("SELECT count(*) FROM embedding_fulltext_search").fetchone() == (0,)


@pytest.mark.parametrize("where", ["folder", "server"])
def test_a_shorter_text_leaves_no_piece_of_the_longer_one(tmp_path: Path, embedder, where, request) -> None:
    # Through a Chroma server too: the count of the longer text's pieces is deleted over HTTP as well.
    url = request.getfixturevalue("chroma_server")[0] if where == "server" else None
    settings = Settings(storage=tmp_path / "store", chroma_url=url)
    index = PaperIndex(settings, embedder=embedder)
    index.ingest([make_paper("p#1", LONG, "p.txt", title="T")])
    assert index.papers_by_id(["p#1"])[0].text == LONG
    short = make_paper("p#1", "A short abstract about sparse autoencoders.", "p.txt", title="T")
    index.ingest([short])  # the same paper, changed: Chroma merges the new metadata into the old record
    assert [p.text for p in index.iter_papers()] == [short.text]
    assert PaperIndex(settings, embedder=embedder).papers_by_id(["p#1"])[0].text == short.text


def test_a_store_written_with_the_text_as_document_is_read_and_exported_the_same(tmp_path: Path, embedder) -> None:
    index = _index(tmp_path / "old", embedder)
    paper = make_paper("old#1", "An abstract stored by an older version, as Chroma's document.", "old.txt",
                       title="Old layout")
    index.ingest([paper])
    vector = index.papers.get(ids=["old#1"], include=["embeddings"])["embeddings"][0]
    meta = paper_metadata(paper, index.fingerprints()["old#1"]) | {"chunks": 1}
    del meta["text"]
    index.papers.delete(ids=["old#1"])
    index.papers.add(ids=["old#1"], embeddings=[vector], documents=[paper.text], metadatas=[meta])
    assert index.papers_by_id(["old#1"])[0].text == paper.text

    exported = tmp_path / "old.ragbot.jsonl.gz"
    export_collection(index, exported)
    with gzip.open(exported, "rt", encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle][1:]
    [record] = [r for r in records if r["kind"] == "paper"]
    assert record["document"] == paper.text and "text" not in record["metadata"]

    fresh = _index(tmp_path / "new", embedder)
    import_collection(fresh, exported)
    assert fresh.papers.get(ids=["old#1"], include=["documents"])["documents"] == [None]
    assert fresh.papers_by_id(["old#1"])[0] == index.papers_by_id(["old#1"])[0]
