"""The Chroma index: incremental ingest, updates, pruning, interruption, persistence and server mode."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.reading.records import make_paper
from rag_bot.settings import Settings
from rag_bot.store.embedding import MiniLMEmbedding
from rag_bot.store.index import PaperIndex
from tests.conftest import free_port

BIN = Path(sys.executable).parent


def _index(storage: Path, embedder: MiniLMEmbedding) -> PaperIndex:
    return PaperIndex(Settings(storage=storage), embedder=embedder)


def _chunks(index: PaperIndex) -> dict[str, tuple[str, tuple[float, ...]]]:
    """chunk id -> (paper id taken from the chunk id, its vector to 2 decimals: what the chunk's text was)."""
    got = index.chunks.get(include=["embeddings", "metadatas"])
    out = {}
    for i, vector, meta in zip(got["ids"], got["embeddings"], got["metadatas"], strict=True):
        assert meta == {"doc_id": i.split("::")[0], "chunk": int(i.split("::")[1])}, "a chunk keeps its paper only"
        out[i] = (i.split("::")[0], tuple(np.round(np.asarray(vector), 2).tolist()))
    return out


def _same_vectors(a: dict, b: dict) -> bool:
    """The same chunks with the same vectors (to within the rounding of one model pass against another)."""
    return a.keys() == b.keys() and all(a[k][0] == b[k][0] and
                                        float(np.max(np.abs(np.subtract(a[k][1], b[k][1])))) <= 0.011 for k in a)


def _state(index: PaperIndex) -> tuple[list[str], list[str], dict[str, str]]:
    chunks = _chunks(index)
    return sorted(index.fingerprints()), sorted(chunks), index.fingerprints()


def _seed_file(path: Path, papers) -> Path:
    path.write_text("ICML 2026 Papers\n\n" + "\n\n".join(p.text for p in papers) + "\n")
    return path


def test_ingest_counts_papers_and_chunks(tmp_path: Path, seed_list, embedder) -> None:
    papers = seed_list[:3]
    index = _index(tmp_path, embedder)
    report = index.ingest(papers)
    expected_chunks = sum(len(index.chunk_nodes(p)) for p in papers)
    assert (report.added, report.updated, report.unchanged, report.removed) == (3, 0, 0, 0)
    assert report.chunks_embedded == expected_chunks >= 3
    assert index.count() == 3
    assert index.chunk_count() == expected_chunks
    stored = {p.doc_id: p for p in index.all_papers()}
    assert set(stored) == {p.doc_id for p in papers}
    for paper in papers:  # what comes back is what went in
        back = stored[paper.doc_id]
        assert (back.title, back.text, back.source, back.aliases, back.links) == (
            paper.title, paper.text, paper.source, paper.aliases, paper.links,
        )
    assert {paper_id for paper_id, _ in _chunks(index).values()} == set(stored)


def test_reingest_embeds_nothing_and_changes_nothing(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    papers = seed_list[3:6]
    index = _index(tmp_path, embedder)
    index.ingest(papers)
    before = _state(index)
    # A fresh handle on the same folder, as a second `rag-bot ingest` would open.
    again = _index(tmp_path, embedder)
    calls: list[list[str]] = []
    original = MiniLMEmbedding.embed

    def counting_embed(self, texts):
        calls.append(texts)
        return original(self, texts)

    monkeypatch.setattr(MiniLMEmbedding, "embed", counting_embed)
    report = again.ingest(papers)
    assert (report.added, report.updated, report.unchanged, report.chunks_embedded) == (0, 0, 3, 0)
    assert calls == []
    assert _state(again) == before


def test_changed_abstract_replaces_its_old_chunks(tmp_path: Path, seed_list, embedder) -> None:
    old, other = seed_list[12], seed_list[13]  # FedRot-LoRA (2+ chunks), DSGym
    index = _index(tmp_path, embedder)
    index.ingest([old, other])
    other_chunks = {i: c for i, c in _chunks(index).items() if c[0] == other.doc_id}
    new_text = (
        "We propose RouterCat, a tiny scheduler that balances packets between the routers of a campus network. "
        "It lowers tail latency by a third."
    )
    new = make_paper(old.doc_id, new_text, old.source)
    report = index.ingest([new, other])
    assert (report.added, report.updated, report.unchanged) == (0, 1, 1)
    assert report.chunks_embedded == len(index.chunk_nodes(new))
    chunks = _chunks(index)
    stored = {i: c for i, c in chunks.items() if c[0] == old.doc_id}
    nodes = index.chunk_nodes(new)
    expected = embedder.embed([f"{new.title}. {n.get_content()}" for n in nodes])
    assert len(stored) == len(nodes), "as many chunks as the new abstract has"
    for n, node in enumerate(nodes):
        assert float(np.dot(stored[node.node_id][1], expected[n])) > 0.99, "the chunks must be the new abstract's"
    assert _same_vectors({i: c for i, c in chunks.items() if c[0] == other.doc_id}, other_chunks)
    assert index.chunk_count() == len(stored) + len(other_chunks)
    assert {p.doc_id: p.text for p in index.all_papers()}[old.doc_id] == new_text


def test_prune_drops_papers_not_given(tmp_path: Path, seed_list, embedder) -> None:
    papers = seed_list[20:24]
    index = _index(tmp_path, embedder)
    index.ingest(papers)
    keep = papers[:2]
    report = index.ingest(keep, prune=True)
    assert (report.unchanged, report.removed, report.chunks_embedded) == (2, 2, 0)
    assert sorted(index.fingerprints()) == sorted(p.doc_id for p in keep)
    assert {paper_id for paper_id, _ in _chunks(index).values()} == {p.doc_id for p in keep}, (
        "chunks of pruned papers are still stored"
    )
    assert index.chunk_count() == sum(len(index.chunk_nodes(p)) for p in keep)


def test_without_prune_other_papers_stay(tmp_path: Path, seed_list, embedder) -> None:
    papers = seed_list[24:26]
    index = _index(tmp_path, embedder)
    index.ingest(papers)
    report = index.ingest(papers[:1])
    assert (report.unchanged, report.removed) == (1, 0)
    assert index.count() == 2


def test_ingest_reads_its_papers_once_as_a_stream_in_bounded_batches(tmp_path: Path, seed_list, embedder) -> None:
    """Papers may come from a one-pass iterator (the files read as a stream): each batch is embedded and written
    before the next papers are read, the progress adds up, and prune still knows every paper given."""
    papers = seed_list[31:36]
    index = _index(tmp_path, embedder)
    index.ingest(papers[:1], batch_papers=2)
    stored_when_read: list[int] = []

    def stream():
        for paper in papers[1:]:
            stored_when_read.append(index.count())
            yield paper

    steps: list[int] = []
    report = index.ingest(stream(), prune=True, progress=steps.append, batch_papers=2)
    assert (report.added, report.unchanged, report.removed) == (4, 0, 1)
    assert stored_when_read == [1, 1, 3, 3], "a batch is written before the next papers are read"
    assert sum(steps) == 4 and max(steps) == 2
    assert sorted(index.fingerprints()) == sorted(p.doc_id for p in papers[1:])


class _Boom(RuntimeError):
    pass


@pytest.mark.parametrize("where", ["embedding", "after-chunks-written"])
def test_interrupted_ingest_finishes_on_rerun(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    papers = seed_list[26:31]

    reference = _index(tmp_path / "reference", embedder)
    reference.ingest(papers, batch_papers=2)

    index = _index(tmp_path / "interrupted", embedder)
    calls = {"n": 0}
    if where == "embedding":  # the model fails while embedding the second batch
        real_embed = MiniLMEmbedding.embed

        def flaky_embed(self, texts):
            calls["n"] += 1
            if calls["n"] == 2:
                raise _Boom("killed while embedding")
            return real_embed(self, texts)

        monkeypatch.setattr(MiniLMEmbedding, "embed", flaky_embed)
    else:  # the second batch's chunks are stored, then the process dies before its paper records
        real_upsert = index.papers.upsert

        def flaky_upsert(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 2:
                raise _Boom("killed before the paper records")
            return real_upsert(*args, **kwargs)

        monkeypatch.setattr(index.papers, "upsert", flaky_upsert)

    with pytest.raises(_Boom):
        index.ingest(papers, batch_papers=2)
    # Only the finished first batch looks done.
    assert sorted(index.fingerprints()) == sorted(p.doc_id for p in papers[:2])
    monkeypatch.undo()

    rerun = _index(tmp_path / "interrupted", embedder)
    report = rerun.ingest(papers, batch_papers=2)
    assert (report.added, report.unchanged) == (3, 2)
    ids, chunk_ids, fingerprints = _state(rerun)
    ref_ids, ref_chunk_ids, ref_fingerprints = _state(reference)
    assert ids == ref_ids == sorted(p.doc_id for p in papers)
    assert chunk_ids == ref_chunk_ids
    assert rerun.chunk_count() == reference.chunk_count()
    assert fingerprints == ref_fingerprints
    assert _same_vectors(_chunks(rerun), _chunks(reference))
    # And a third run has nothing left to do.
    assert rerun.ingest(papers, batch_papers=2).chunks_embedded == 0


def _run(args: list[str], env_storage: Path, timeout: int = 180) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(env_storage)
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=env_storage.parent)


def test_store_persists_across_processes(tmp_path: Path, seed_list) -> None:
    corpus = _seed_file(tmp_path / "mini.txt", seed_list[:3])  # Het-CPFLoRA, LED, MMSearchAgent
    storage = tmp_path / "store"
    report, _ = Engine(Settings(storage=storage)).ingest([corpus])
    assert report.added == 3 and report.chunks_embedded > 0

    ingest = _run([str(BIN / "rag-bot"), "ingest", "--quiet", str(corpus)], storage)
    assert ingest.returncode == 0, ingest.stderr
    assert "0 added, 0 updated, 3 unchanged" in ingest.stdout
    assert "(0 chunks embedded)" in ingest.stdout
    assert "holds 3 papers" in ingest.stdout

    ask = _run(
        [str(BIN / "rag-bot"), "ask", "--json",
         "Which decoding strategy uses the entropy of intermediate layers to restore exploration?"],
        storage,
    )
    assert ask.returncode == 0, ask.stderr
    answer = json.loads(ask.stdout.strip().splitlines()[-1])
    assert answer["grounded"] is True
    assert answer["citations"], answer
    assert answer["citations"][0]["doc_id"] == "mini#2"
    assert answer["citations"][0]["source"] == "mini.txt"
    assert {c["doc_id"] for c in answer["citations"]} <= {"mini#1", "mini#2", "mini#3"}
    assert "[1]" in answer["answer"]


def _wait_heartbeat(port: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chroma run exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("chroma server did not answer its heartbeat")


@pytest.fixture
def chroma_server(tmp_path: Path):
    path = tmp_path / "server-data"
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "chroma"), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_heartbeat(port, proc)
        yield f"http://127.0.0.1:{port}", path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_chroma_server_mode_ingests_and_answers(tmp_path: Path, seed_list, chroma_server) -> None:
    url, server_path = chroma_server
    corpus = _seed_file(tmp_path / "srv.txt", [seed_list[3], seed_list[12], seed_list[16]])  # SARSteer, FedRot, VISTA
    unused = tmp_path / "unused-folder"
    engine = Engine(Settings(chroma_url=url, storage=unused))
    report, _ = engine.ingest([corpus])
    assert report.added == 3 and report.chunks_embedded > 0
    stats = engine.stats()
    assert stats["papers"] == 3 and stats["chunks"] == report.chunks_embedded
    assert url in stats["store"]
    assert not unused.exists(), "server mode must not write a local store"
    assert (server_path / "chroma.sqlite3").exists()

    answer = engine.ask("How can federated LoRA fix rotational misalignment of client updates before averaging?")
    assert answer.grounded
    assert answer.citations and answer.citations[0].doc_id == "srv#2"
    assert "FedRot-LoRA" in answer.citations[0].title

    # A second client of the same server sees the papers and re-embeds nothing.
    again = Engine(Settings(chroma_url=url, storage=unused)).ingest([corpus])[0]
    assert (again.unchanged, again.chunks_embedded) == (3, 0)


@pytest.mark.parametrize("url", ["localhost:8000", "chroma.example.org", "ftp://127.0.0.1:8000"])
def test_malformed_chroma_url_is_a_clear_settings_error(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Refused when the settings are read, before any store is opened."""
    from rag_bot.settings import SettingsError

    monkeypatch.setenv("RAG_BOT_CHROMA_URL", url)
    with pytest.raises(SettingsError) as info:
        Settings()
    assert "RAG_BOT_CHROMA_URL" in str(info.value) and "http://host:port" in str(info.value)
    assert url in str(info.value)


def test_unreachable_chroma_server_is_a_clear_store_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("RAG_BOT_CHROMA_URL", url)
    with pytest.raises(StoreError) as info:
        Engine(Settings())
    assert f"cannot reach the Chroma server at {url}" in str(info.value)

    from rag_bot.surfaces.cli import main

    assert main(["stats"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rag-bot: cannot reach the Chroma server") and "Traceback" not in err


# --- store repair (`rag-bot ingest --rebuild`, rag_bot/store/repair.py) ---------------------------------------------
def _listing(folder: Path) -> dict[str, bytes]:
    """Every file below a folder with its bytes (to show a store was not touched)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rebuild_leaves_the_saved_conversations_where_they_are(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """RAG_BOT_DATA unset: the conversations live in the store folder. A rebuild moves the store aside and leaves
    them (the sqlite file and its -wal/-shm, still open as a running `serve` holds them) in the fresh folder."""
    from rag_bot.store.conversations import FILE_NAME, Conversations
    from rag_bot.surfaces.cli import main

    storage = tmp_path / "store"
    _index(storage, embedder).ingest(seed_list[:2])
    conversations = Conversations(storage)
    conversation = conversations.create("ann", "what is LED?")
    assert conversation is not None
    link = conversations.append(conversation, "ann", "what is LED?", None)
    assert link and (storage / f"{FILE_NAME}-wal").exists(), "the live WAL file a move of the folder would split"
    inode = (storage / FILE_NAME).stat().st_ino
    corpus = _seed_file(tmp_path / "mini.txt", seed_list[2:3])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_BOT_STORAGE", str(storage))
    monkeypatch.delenv("RAG_BOT_DATA", raising=False)

    assert main(["ingest", "--rebuild", "--quiet", str(corpus)]) == 0
    err = capsys.readouterr().err
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("store.broken-")]
    assert len(aside) == 1 and (aside[0] / "chroma.sqlite3").exists() and str(aside[0]) in err
    assert not [p.name for p in aside[0].iterdir() if p.name.startswith(FILE_NAME)], "conversations moved aside"
    assert (storage / FILE_NAME).stat().st_ino == inode, "the conversations file itself was never moved"
    assert "saved conversations stay where they are" in err
    # The open connection (a running chat) and a new one (a restarted chat) both find the turn and its permalink.
    for store in (conversations, Conversations(storage)):
        assert [s.id for s in store.recent("ann")] == [conversation]
        shared = store.shared(link)
        assert shared is not None and shared.turn.question == "what is LED?"
    assert conversations.append(conversation, "ann", "and then?", None), "the chat goes on saving"
    assert sorted(_index(storage, embedder).fingerprints()) == ["mini#1"], "the store itself is fresh"


def test_rebuild_leaves_a_tuned_model_where_the_settings_point_at_it(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`rag-bot tune` writes its model into <storage>/models/: a rebuild moves the store aside, not the model a
    RAG_BOT_EMBED_PATH names."""
    from rag_bot.surfaces.cli import main

    storage = tmp_path / "store"
    _index(storage, embedder).ingest(seed_list[:2])
    model = storage / "models" / "abstracts-tuned" / "model.onnx"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"weights")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_BOT_STORAGE", str(storage))
    assert main(["ingest", "--rebuild", "--quiet", str(_seed_file(tmp_path / "mini.txt", seed_list[2:3]))]) == 0
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("store.broken-")]
    assert len(aside) == 1 and not (aside[0] / "models").exists()
    assert model.read_bytes() == b"weights"
    capsys.readouterr()


def test_rebuild_refuses_while_an_ingest_holds_the_lock_and_moves_nothing(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_bot.surfaces.cli import main

    storage = tmp_path / "store"
    writer = _index(storage, embedder)
    writer.ingest(seed_list[:2])
    corpus = _seed_file(tmp_path / "mini.txt", seed_list[2:3])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_BOT_STORAGE", str(storage))
    before = _listing(storage)
    with writer.writer_lock(wait=False) as held:  # the lock an ingest holds while it writes
        assert held
        assert main(["ingest", "--rebuild", "--quiet", str(corpus)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "another `rag-bot ingest` is writing the store" in lines[0], lines
    assert "nothing was moved" in lines[0] and str(storage) in lines[0]
    assert not [p for p in tmp_path.iterdir() if ".broken-" in p.name]
    assert _listing(storage) == before
    assert _index(storage, embedder).count() == 2


def test_a_paper_whose_metadata_cannot_be_read_is_skipped_and_reported(
        tmp_path: Path, seed_list, embedder, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """One malformed record (here its aliases are not JSON) used to make every read of the papers fail."""
    index = _index(tmp_path / "store", embedder)
    index.ingest(seed_list[:3])
    broken = seed_list[1].doc_id
    index.papers.update(ids=[broken], metadatas=[{"aliases": "{not json"}])
    # The CLI's logging set-up stops propagation at "rag_bot"; caplog listens at the root.
    monkeypatch.setattr(logging.getLogger("rag_bot"), "propagate", True)
    with caplog.at_level(logging.WARNING, logger="rag_bot.store.index"):
        papers = index.all_papers()
    assert sorted(p.doc_id for p in papers) == sorted(p.doc_id for p in seed_list[:3] if p.doc_id != broken)
    assert any(broken in r.getMessage() and "'aliases'" in r.getMessage() for r in caplog.records)
    health = index.health()
    assert not health.healthy and list(health.unreadable) == [broken]
    assert "'aliases'" in health.unreadable[broken] and not health.wrong_dimension


def test_rebuild_leaves_a_conversations_folder_inside_the_store_folder(tmp_path: Path) -> None:
    """RAG_BOT_DATA may point below the store folder: that folder stays too; only the store's files move."""
    from rag_bot.store.repair import rebuild_store

    storage = tmp_path / "store"
    (storage / "chats").mkdir(parents=True)
    (storage / "chats" / "conversations.sqlite3").write_bytes(b"saved")
    (storage / "chroma.sqlite3").write_bytes(b"store")
    (storage / "lexicon").mkdir()
    said = rebuild_store(Settings(storage=storage, data=storage / "chats"))
    [aside] = [p for p in tmp_path.iterdir() if p.name.startswith("store.broken-")]
    assert str(aside) in said
    assert sorted(p.name for p in aside.iterdir()) == ["chroma.sqlite3", "lexicon"]
    assert sorted(p.name for p in storage.iterdir()) == ["chats", "rag-bot.lock"]
    assert (storage / "chats" / "conversations.sqlite3").read_bytes() == b"saved"


def test_a_write_failure_guesses_a_full_disk_only_when_the_cause_says_so(tmp_path: Path) -> None:
    """Every failed write used to say "(disk full?)", a locked database or a broken record included."""
    from rag_bot.store.chroma import store_error
    settings = Settings(storage=tmp_path / "store")
    full = str(store_error(settings, "write", OSError(28, "No space left on device")))
    assert "(disk full?)" in full and "free some space" in full
    assert "(disk full?)" in str(store_error(settings, "write", sqlite3.OperationalError("database or disk is full")))
    locked = str(store_error(settings, "write", sqlite3.OperationalError("database is locked")))
    assert "disk full" not in locked and "free some space" not in locked
    assert locked.startswith("the store could not be written: database is locked") and "run the same ingest" in locked


@pytest.mark.slow
def test_a_server_reached_at_another_address_keeps_its_lexical_cache(tmp_path: Path, seed_list, chroma_server,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """The cache of a server's collection is named by the collection, not the address it was reached at: a server
    restarted on another port, or reached as localhost, does not rebuild it (111 s at 100,000 papers)."""
    url, _ = chroma_server
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    caplog.set_level("INFO", logger="rag_bot.retrieval.retrieve")
    corpus = _seed_file(tmp_path / "srv.txt", [seed_list[3], seed_list[12], seed_list[16]])
    first = Engine(Settings(chroma_url=url, storage=tmp_path / "unused"))
    first.ingest([corpus])
    first.prepare()
    other = url.replace("127.0.0.1", "localhost")
    engine = Engine(Settings(chroma_url=other, storage=tmp_path / "unused"))
    engine.prepare()
    loaded = [r.getMessage() for r in caplog.records if "retriever loaded" in r.getMessage()]
    assert loaded and "cache lexicon" in loaded[-1], loaded
    answer = engine.ask("How can federated LoRA fix rotational misalignment of client updates before averaging?")
    assert [c.doc_id for c in answer.citations][:1] == ["srv#2"]


def test_an_upload_replaces_no_stored_paper_unless_asked(tmp_path):
    """The chat's upload (engine.ingest with replace=False) used to write over a stored paper whose id a file
    reused (a JSONL id, or a BibTeX `note = {rag-bot doc_id ...}`), saying only "1 updated"."""
    import bibtexparser
    from bibtexparser.model import Entry, Field

    folder = tmp_path / "in"
    folder.mkdir()
    real = folder / "real.jsonl"
    real.write_text(json.dumps({"id": "zeb-1", "title": "ZebraStripe: striped attention for tabular forecasting",
                                "abstract": "ZebraStripe alternates row and column attention over tabular time "
                                            "series and cuts forecasting error by 18% on M5."}) + "\n")
    planted = folder / "planted.jsonl"
    planted.write_text(json.dumps({"id": "zeb-1", "title": "ZebraStripe", "abstract": "ZebraStripe is a scam, do not use it."}) + "\n")
    library = bibtexparser.Library()
    library.add(Entry("article", "anykey", [Field("title", "ZebraStripe"), Field("note", "rag-bot doc_id zeb-1"),
                                            Field("abstract", "ZebraStripe does not work at all.")]))
    bib = folder / "planted.bib"
    bib.write_text(bibtexparser.write_string(library), encoding="utf-8")
    engine = Engine(Settings(storage=tmp_path / "store"))
    engine.ingest([real])
    for file in (planted, bib):
        report, _ = engine.ingest([file], replace=False)
        assert (report.added, report.updated, report.not_replaced) == (0, 0, ["zeb-1"]), file.name
        assert "18% on M5" in engine.papers["zeb-1"].text
    same, _ = engine.ingest([real], replace=False)  # the same record again is no replacement
    assert (same.unchanged, same.not_replaced) == (1, [])
    report, _ = engine.ingest([planted], replace=True)  # the uploader asked (and the CLI owns its store)
    assert report.updated == 1 and engine.papers["zeb-1"].text == "ZebraStripe is a scam, do not use it."
