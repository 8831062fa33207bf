"""Sentence vectors: embedded once per paper ever (persisted in an SQLite file beside the store), batched across a question's
papers, never stale after an abstract changes, and never a reason for an answer to fail or differ."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from rag_bot.engine import Engine
from rag_bot.settings import Settings
from rag_bot.store.embedding import MODEL_NAME, MiniLMEmbedding
from rag_bot.store.index import PaperIndex
from rag_bot.store.reads import SENTENCES_SUFFIX
from rag_bot.store.sentence_file import SENTENCES, sentence_file
from rag_bot.store.sentences import LEGACY, SentenceIndex, pack_and_restore, paper_sentences, sentence_key
from tests.store.test_index import chroma_server  # noqa: F401 - a `chroma run` server on loopback

QUESTIONS = (
    "How does CorrSteer select features for steering?",
    "summarize the work on speculative decoding",
    "What is the best recipe for sourdough bread?",
)


class Counting:
    """Counts the model calls of the real embedder (and the texts embedded)."""

    def __init__(self) -> None:
        self.calls = 0
        self.texts = 0


@pytest.fixture
def store(seed_storage: Path, tmp_path: Path) -> Path:
    """A private copy of the seed store (tests write its sentence collection)."""
    copy = tmp_path / "store"
    shutil.copytree(seed_storage, copy)
    return copy


@pytest.fixture
def index(store: Path, engine) -> PaperIndex:
    index = PaperIndex(Settings(storage=store), embedder=engine.index.embedder)
    # The session's engine answered questions on the seed store, so its copy may hold sentence vectors already:
    # each test starts from none.
    shutil.rmtree(SENTENCES.root(index), ignore_errors=True)
    return index


@pytest.fixture
def counting(index: PaperIndex, monkeypatch: pytest.MonkeyPatch) -> Counting:
    spy = Counting()
    real = MiniLMEmbedding.embed

    def embed(model: MiniLMEmbedding, texts: list[str]) -> np.ndarray:
        spy.calls += 1
        spy.texts += len(texts)
        return real(model, texts)

    monkeypatch.setattr(MiniLMEmbedding, "embed", embed)
    return spy


def papers_of(index: PaperIndex, n: int):
    return sorted(index.all_papers(), key=lambda p: p.doc_id)[:n]


def test_a_papers_sentences_are_embedded_once_ever(index: PaperIndex, counting: Counting) -> None:
    papers = papers_of(index, 5)
    first = SentenceIndex(index.embedder, store=index)
    computed = [first.of(p) for p in papers]
    assert counting.calls == 5
    later = SentenceIndex(index.embedder, store=index)  # a new process on the same store
    again = [later.of(p) for p in papers]
    assert counting.calls == 5, "a later index re-embedded sentences the store holds"
    for (sentences, vectors), (sentences2, vectors2), paper in zip(computed, again, papers):
        assert sentences == sentences2 == paper_sentences(paper)
        assert np.array_equal(vectors, vectors2), "persisted vectors differ from the computed ones"
        assert vectors.shape == (len(sentences), 384)


def test_a_questions_papers_are_embedded_in_one_model_call(index: PaperIndex, counting: Counting) -> None:
    papers = papers_of(index, 6)
    batched = SentenceIndex(index.embedder)
    batched.prefetch(papers)
    assert counting.calls == 1
    assert counting.texts == sum(len(paper_sentences(p)) for p in papers)
    one_by_one = SentenceIndex(index.embedder)
    for paper in papers:
        assert np.array_equal(batched.of(paper)[1], one_by_one.of(paper)[1])
    assert counting.calls == 1 + len(papers)


def test_a_group_is_embedded_together_at_the_first_use_of_one_of_its_papers(
    index: PaperIndex, counting: Counting
) -> None:
    papers = papers_of(index, 7)
    sentences = SentenceIndex(index.embedder)
    vectors = sentences.batched(papers[:3], papers[3:6])
    vectors(papers[1])
    assert counting.calls == 1 and counting.texts == sum(len(paper_sentences(p)) for p in papers[:3])
    vectors(papers[0]), vectors(papers[2])
    assert counting.calls == 1
    vectors(papers[4])  # the second group, all at once
    vectors(papers[3]), vectors(papers[5])
    assert counting.calls == 2
    vectors(papers[6])  # in no group: alone
    assert counting.calls == 3


def test_a_changed_abstract_gets_fresh_vectors(index: PaperIndex, counting: Counting) -> None:
    paper = papers_of(index, 1)[0]
    SentenceIndex(index.embedder, store=index).of(paper)
    changed = paper.model_copy(update={"text": "A new first sentence about tokamak plasma control. " + paper.text})
    sentences, vectors = SentenceIndex(index.embedder, store=index).of(changed)
    assert sentences[0] == "A new first sentence about tokamak plasma control."
    assert counting.calls == 2
    fresh = SentenceIndex(index.embedder).of(changed)[1]
    assert np.array_equal(vectors, fresh)
    # The new vectors replaced the old ones in the store: the changed paper is not embedded again.
    SentenceIndex(index.embedder, store=index).of(changed)
    assert counting.calls == 3  # only the `fresh` comparison above embedded


def test_fill_embeds_only_what_the_store_lacks(index: PaperIndex, counting: Counting) -> None:
    papers = index.all_papers()
    sentences = SentenceIndex(index.embedder, store=index)
    sentences.of(papers[0])
    assert sentences.fill(papers) == len(papers) - 1
    assert sentences.store is not None and sentences.store.count() == len(papers)
    assert sentences.fill(papers) == 0


def test_answers_are_the_same_with_the_persisted_vectors(store: Path, engine) -> None:
    index = PaperIndex(Settings(storage=store), embedder=engine.index.embedder)
    plain = Engine(Settings(storage=store), index=index, sentences=SentenceIndex(index.embedder))
    fill = Engine(Settings(storage=store), index=index, sentences=SentenceIndex(index.embedder, store=index))
    reused = Engine(Settings(storage=store), index=index, sentences=SentenceIndex(index.embedder, store=index))
    for question in QUESTIONS:
        expected = plain.ask(question)
        for answers in (fill, reused):  # first use (computed and written), then read back from the store
            got = answers.ask(question)
            assert got.grounded == expected.grounded
            assert got.answer == expected.answer
            assert [(c.doc_id, c.quote, c.support) for c in got.citations] == \
                   [(c.doc_id, c.quote, c.support) for c in expected.citations]


def test_a_failing_sentence_store_only_costs_time(
    index: PaperIndex, counting: Counting, caplog: pytest.LogCaptureFixture
) -> None:
    sentences = SentenceIndex(index.embedder, store=index)
    sentence_file(index).path.mkdir(parents=True)  # a folder where the file goes: unopenable
    paper = papers_of(index, 1)[0]
    with caplog.at_level(logging.WARNING, logger="rag_bot.store.sentences"):
        got, vectors = sentences.of(paper)
    assert got == paper_sentences(paper) and vectors.shape == (len(got), 384)
    assert "could not be read" in caplog.text
    engine = Engine(Settings(storage=index.settings.storage), index=index, sentences=sentences)
    assert engine.ask(QUESTIONS[0]).grounded


def test_pruned_papers_leave_no_sentence_vectors_behind(index: PaperIndex) -> None:
    papers = sorted(index.all_papers(), key=lambda p: p.doc_id)
    sentences = SentenceIndex(index.embedder, store=index)
    sentences.fill(papers[:3])
    assert sentences.store is not None and sentences.store.count() == 3
    # Keep every paper but the first two: their cached vectors go with them, the third's stays.
    report = index.ingest(papers[2:], prune=True)
    assert report.removed == 2
    assert sentences.store.count() == 1
    assert list(sentences.store.file.get([p.doc_id for p in papers])) == [papers[2].doc_id]


def test_a_bracketed_number_in_an_abstract_is_not_an_answer_citation():
    from rag_bot.store.sentences import paper_sentences
    from rag_bot.types import Paper

    paper = Paper(doc_id="d", title="t", source="s", text="The method of Silver et al. [2014] works. We extend [3, 4].")
    assert paper_sentences(paper) == ["The method of Silver et al. (2014) works.", "We extend (3, 4)."]


def test_a_paper_s_vectors_take_under_400_bytes_a_sentence_and_keep_their_direction(index: PaperIndex) -> None:
    sentences = SentenceIndex(index.embedder, store=index)
    papers = papers_of(index, 6)
    sentences.fill(papers)
    assert sentences.store is not None
    rows = sentences.store.file.get([p.doc_id for p in papers])
    assert len(rows) == 6
    for _key, n, raw in rows.values():
        assert len(raw) == n * (384 + 4), "384 one-byte numbers and a four-byte scale per sentence"
    for paper in papers:
        exact = index.embedder.embed(paper_sentences(paper))
        kept = sentences.of(paper)[1]
        assert kept.shape == exact.shape
        assert float(np.min(np.sum(kept * exact, axis=1))) > 0.999, "cosine of each kept vector to the exact one"


def test_a_file_of_another_layout_is_emptied_not_misread(index: PaperIndex, counting: Counting) -> None:
    paper = papers_of(index, 1)[0]
    n = len(paper_sentences(paper))
    SentenceIndex(index.embedder, store=index).fill([paper])
    path = sentence_file(index).path
    with sqlite3.connect(path) as db:  # as a later release with another packing would leave it
        db.execute("UPDATE vectors SET data = ?", (np.ones((n, 384), dtype="<f4").tobytes(),))
        db.execute("PRAGMA user_version = 7")
    counting.calls = 0
    vectors = SentenceIndex(index.embedder, store=index).of(paper)[1]
    assert counting.calls == 1, "the other layout's row was not read as this one"
    assert float(np.min(np.sum(vectors * index.embedder.embed(paper_sentences(paper)), axis=1))) > 0.999
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SENTENCES.format
        assert db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0] == 1


def test_a_store_s_sentence_collection_is_moved_into_the_file_once(index: PaperIndex, counting: Counting) -> None:
    """Stores written before the file kept the vectors in a `<name>_sentences` Chroma collection (base64 metadata):
    they are read from the file after the move, not embedded again, and the collection is gone."""
    name = f"{index.settings.collection}{SENTENCES_SUFFIX}"
    papers = papers_of(index, 3)
    old = index.client.get_or_create_collection(name, metadata={"layout": LEGACY}, embedding_function=None)
    expected = {}
    for paper in papers:
        raw, expected[paper.doc_id] = pack_and_restore(index.embedder.embed(paper_sentences(paper)))
        old.upsert(ids=[paper.doc_id], embeddings=[[1.0]], metadatas=[{
            "key": sentence_key(paper_sentences(paper), index.embedder.max_tokens, MODEL_NAME),
            "n": len(paper_sentences(paper)), "vectors": base64.b64encode(raw).decode()}])
    counting.calls = 0
    sentences = SentenceIndex(index.embedder, store=index)
    for paper in papers:
        assert np.array_equal(sentences.of(paper)[1], expected[paper.doc_id])
    assert counting.calls == 0, "moved vectors were embedded again"
    assert name not in {c.name for c in index.client.list_collections()}
    assert sentences.store is not None and sentences.store.count() == 3


def test_an_older_sentence_collection_is_dropped_and_refilled(index: PaperIndex, counting: Counting) -> None:
    name = f"{index.settings.collection}{SENTENCES_SUFFIX}"
    paper = papers_of(index, 1)[0]
    old = index.client.get_or_create_collection(name, metadata={"hnsw:space": "cosine"}, embedding_function=None)
    n = len(paper_sentences(paper))
    # float32 vectors beside a 384-number mean, as stores written before the 8-bit layout hold them
    old.upsert(ids=[paper.doc_id], embeddings=[[0.05] * 384], metadatas=[{
        "key": sentence_key(paper_sentences(paper), index.embedder.max_tokens, MODEL_NAME), "n": n,
        "vectors": base64.b64encode(np.ones((n, 384), dtype="<f4").tobytes()).decode()}])
    vectors = SentenceIndex(index.embedder, store=index).of(paper)[1]
    assert counting.calls == 1, "the old record was not read as if it were the new layout"
    assert float(np.min(np.sum(vectors * index.embedder.embed(paper_sentences(paper)), axis=1))) > 0.999
    assert name not in {c.name for c in index.client.list_collections()}


def test_sentences_embedded_by_the_ingest_leave_no_answer_waiting_for_them(tmp_path: Path, engine, seed_list,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """RAG_BOT_SENTENCE_VECTORS=ingest: the ingest that writes a paper embeds its sentences, so a later process's
    first question embeds none; on-demand (the default), that question embeds them."""
    embedded: list[int] = []
    real = SentenceIndex._embed

    def spy(self, groups):
        embedded.append(sum(len(g) for g in groups))
        return real(self, groups)

    monkeypatch.setattr(SentenceIndex, "_embed", spy)
    data = tmp_path / "papers.jsonl"
    data.write_text("".join(json.dumps({"id": p.doc_id, "title": p.title, "abstract": p.text}) + "\n"
                            for p in seed_list[:6]))
    question = f"what does {seed_list[2].title} propose?"
    for mode in ("ingest", "on-demand"):
        store = tmp_path / mode
        settings = Settings(storage=store, sentence_vectors=mode)
        Engine(settings, index=PaperIndex(settings, embedder=engine.index.embedder)).ingest([data])
        at_ingest = sum(embedded)
        embedded.clear()
        answer = Engine(settings, index=PaperIndex(settings, embedder=engine.index.embedder)).ask(question)
        assert answer.grounded
        if mode == "ingest":
            assert at_ingest >= 6 and embedded == [], "the question embedded sentences the ingest had embedded"
        else:
            assert at_ingest == 0 and sum(embedded) > 0
        embedded.clear()


@pytest.mark.slow
def test_through_a_chroma_server_the_vectors_are_kept_in_the_user_s_cache_folder(
    tmp_path: Path, engine, seed_list, chroma_server, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    """A client of a `chroma run` server keeps the sentence vectors in its user's cache folder, named by the
    collection (as the lexical cache): another process of that user reads them, and a prune drops them."""
    url, _ = chroma_server
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    settings = Settings(chroma_url=url, storage=tmp_path / "unused")
    index = PaperIndex(settings, embedder=engine.index.embedder)
    index.ingest(seed_list[:4])
    papers = sorted(index.all_papers(), key=lambda p: p.doc_id)
    assert SentenceIndex(index.embedder, store=index).fill(papers) == 4
    path = sentence_file(index).path
    assert path.is_file() and path.is_relative_to(tmp_path / "cache")
    assert not (tmp_path / "unused").exists(), "nothing is written where a folder store would be"

    later = PaperIndex(settings, embedder=engine.index.embedder)
    calls: list[int] = []
    real = MiniLMEmbedding.embed
    monkeypatch.setattr(MiniLMEmbedding, "embed", lambda model, texts: calls.append(len(texts)) or real(model, texts))
    for paper in papers:
        SentenceIndex(later.embedder, store=later).of(paper)
    assert calls == [], "another process of the user embedded what the cache holds"
    later.ingest(papers[1:], prune=True)
    assert SentenceIndex(later.embedder, store=later).store.file.count() == 3
