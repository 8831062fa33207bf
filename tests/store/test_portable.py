"""Collections that travel: `rag-bot export` writes one file, `rag-bot import` loads it into any store (a folder or
a real `chroma run` server) without embedding anything, and the imported collection answers as the original."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.api.models.Collection import Collection
from chromadb.config import Settings as ChromaSettings

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.index import PaperIndex
from rag_bot.store.portable import export_collection, import_collection
from rag_bot.surfaces.cli import main
from tests.store.test_index import chroma_server  # noqa: F401 - the real `chroma run` fixture

QUESTION = "What does CorrSteer gain on HarmBench?"


class NoModel:
    """An embedding model, passed to the store, that fails the test at its first use: an import needs none."""

    def __getattr__(self, name: str):
        raise AssertionError(f"the import used the embedding model ({name})")


@pytest.fixture(scope="module")
def exported(engine, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("export") / "seeds.ragbot.jsonl.gz"
    counts = export_collection(engine.index, path)
    assert counts == {"papers": engine.index.count(), "chunks": engine.index.chunk_count()}
    return path


def test_import_into_a_folder_embeds_nothing_and_answers_the_same(engine, exported, tmp_path):
    index = PaperIndex(Settings(storage=tmp_path / "store"), embedder=NoModel())
    counts = import_collection(index, exported)
    assert counts == {"papers": engine.index.count(), "chunks": engine.index.chunk_count(), "replaced": 0}
    copy = Engine(Settings(storage=tmp_path / "store"))
    original, imported = engine.ask(QUESTION), copy.ask(QUESTION)
    assert imported.answer == original.answer and imported.citations == original.citations
    # importing again replaces, never duplicates
    import_collection(PaperIndex(Settings(storage=tmp_path / "store")), exported)
    assert Engine(Settings(storage=tmp_path / "store")).stats()["papers"] == engine.index.count()


def test_the_cli_import_shows_the_check_then_every_record_written(engine, exported, tmp_path, capsys):
    """A million papers' file takes minutes to check and hours to write: the user sees both, the bar counting
    every record (chunks and papers), and `--quiet` shows neither."""
    records = engine.index.count() + engine.index.chunk_count()
    code, out, err = _import(tmp_path / "quiet", exported, capsys)
    assert code == 0 and err.strip() == "" and "Imported" in out
    assert main(["--storage", str(tmp_path / "store"), "import", str(exported)]) == 0
    err = capsys.readouterr().err
    assert err.index(f"Checking {exported}") < err.index("Importing")
    assert f"{records}/{records}" in err, "the bar ends at every record of the file"


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


# --- A file is checked whole before anything is written, and written all or nothing (issue 19) ---------------------

def _load(path: Path) -> tuple[dict, list[dict]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        manifest = json.loads(handle.readline())
        return manifest, [json.loads(line) for line in handle]


def _save(path: Path, manifest: dict, records: list[dict], counts: bool = True) -> Path:
    if counts:  # a consistent manifest, so that only the problem under test is one
        manifest = dict(manifest, papers=sum(r["kind"] == "paper" for r in records),
                        chunks=sum(r["kind"] == "chunk" for r in records))
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for obj in [manifest, *records]:
            out.write(json.dumps(obj) + "\n")
    return path


def _copy_store(seed_storage: Path, tmp_path: Path) -> Path:
    store = tmp_path / "store"
    shutil.copytree(seed_storage, store)
    return store


def _snapshot(store: Path) -> dict[str, dict]:
    """Every record of both collections, read with a bare Chroma client (opening a PaperIndex would clean up)."""
    client = chromadb.PersistentClient(path=str(store), settings=ChromaSettings(anonymized_telemetry=False))
    out = {}
    for suffix in ("_papers", "_chunks"):
        got = client.get_collection(f"{Settings().collection}{suffix}").get(
            include=["documents", "metadatas", "embeddings"])
        out[suffix] = {i: (d, m, [float(x) for x in e])
                       for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"])}
    return out


def _assert_same(after: dict[str, dict], before: dict[str, dict]) -> None:
    """The same records: ids, documents and metadata exactly, vectors to float32 precision (Chroma itself gives a
    vector back a unit in the last place off now and then, even from a plain upsert: measured, chromadb 1.5)."""
    for suffix, records in before.items():
        assert set(after[suffix]) == set(records), f"{suffix}: records added or lost"
        for record_id, (document, metadata, vector) in records.items():
            got = after[suffix][record_id]
            assert (got[0], got[1]) == (document, metadata), record_id
            assert np.allclose(got[2], vector, rtol=0, atol=1e-6), record_id


def _import(store: Path, path: Path, capsys) -> tuple[int, str, str]:
    code = main(["--storage", str(store), "import", "--quiet", str(path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(code: int, err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "Traceback" not in err and "unexpected error" not in err
    return lines[0]


def test_vectors_of_another_dimension_are_refused_before_anything_is_written(exported, tmp_path, capsys):
    manifest, records = _load(exported)
    for record in records:  # as another model would have embedded them
        record["embedding"] = record["embedding"][:256]
    path = _save(tmp_path / "other-model.jsonl.gz", manifest, records)
    code, _, err = _import(tmp_path / "store", path, capsys)
    line = _refused(code, err)
    assert f"{path}:2:" in line and "256 dimensions" in line and "384" in line and "nothing was imported" in line
    assert PaperIndex(Settings(storage=tmp_path / "store")).count() == 0


@pytest.mark.parametrize("field", ["authors", "aliases", "links"])
def test_a_paper_with_unreadable_metadata_is_refused_and_the_store_is_unchanged(
        exported, seed_storage, tmp_path, capsys, field):
    manifest, records = _load(exported)
    n, bad = next((n, r) for n, r in enumerate(records) if r["kind"] == "paper")
    bad["metadata"][field] = '["Ada Lovelace", '  # cut JSON text, as in the hostile probe
    path = _save(tmp_path / "bad.jsonl.gz", manifest, records)
    store = _copy_store(seed_storage, tmp_path)
    before = _snapshot(store)
    line = _refused(*_import(store, path, capsys)[::2])
    assert f"{path}:{n + 2}:" in line and bad["id"] in line and f"'{field}'" in line and "not valid JSON" in line
    _assert_same(_snapshot(store), before)


def test_a_number_too_large_to_store_is_refused_and_the_store_is_unchanged(exported, seed_storage, tmp_path, capsys):
    """A `year` of 10**30 used to import (exit 0) and then make its paper unreadable on every question."""
    manifest, records = _load(exported)
    n, bad = next((n, r) for n, r in enumerate(records) if r["kind"] == "paper")
    bad["metadata"]["year"] = 10**30
    path = _save(tmp_path / "huge.jsonl.gz", manifest, records)
    store = _copy_store(seed_storage, tmp_path)
    before = _snapshot(store)
    line = _refused(*_import(store, path, capsys)[::2])
    assert f"{path}:{n + 2}:" in line and "'year'" in line and "too large" in line
    _assert_same(_snapshot(store), before)


@pytest.mark.parametrize("cut", ["truncated", "damaged"])
def test_a_truncated_or_damaged_file_is_refused_in_one_line(exported, tmp_path, capsys, cut):
    data = bytearray(exported.read_bytes())
    if cut == "truncated":
        data = data[: len(data) * 3 // 5]
    else:
        data[len(data) // 2] ^= 0xFF
    path = tmp_path / f"{cut}.jsonl.gz"
    path.write_bytes(bytes(data))
    line = _refused(*_import(tmp_path / "store", path, capsys)[::2])
    assert "the file is truncated or damaged" in line and str(path) in line
    assert PaperIndex(Settings(storage=tmp_path / "store")).count() == 0


@pytest.mark.parametrize("keep", ["chunk", "paper"])
def test_a_file_of_chunks_only_or_papers_only_is_refused(exported, tmp_path, capsys, keep):
    manifest, records = _load(exported)
    path = _save(tmp_path / f"{keep}s-only.jsonl.gz", manifest, [r for r in records if r["kind"] == keep])
    line = _refused(*_import(tmp_path / "store", path, capsys)[::2])
    assert ("which is not in the file" if keep == "chunk" else "has no chunk in the file") in line
    index = PaperIndex(Settings(storage=tmp_path / "store"))
    assert index.count() == 0 and index.chunk_count() == 0, "no orphans left"


def test_a_manifest_whose_counts_disagree_with_the_records_is_refused(exported, tmp_path, capsys):
    manifest, records = _load(exported)
    path = _save(tmp_path / "short.jsonl.gz", dict(manifest, papers=manifest["papers"] + 1), records, counts=False)
    line = _refused(*_import(tmp_path / "store", path, capsys)[::2])
    assert f"{path}:1:" in line and "manifest says" in line


def _edited(exported: Path, tmp_path: Path) -> tuple[Path, str, str]:
    """The seed export with 5 papers added (copies under new ids), 5 replaced (revised abstracts) and one replaced
    by a version with one chunk fewer; returns the file, that paper's id and its dropped chunk id."""
    manifest, records = _load(exported)
    chunks = [r for r in records if r["kind"] == "chunk"]
    papers = [r for r in records if r["kind"] == "paper"]
    per_paper = {p["id"]: [c for c in chunks if c["metadata"]["doc_id"] == p["id"]] for p in papers}
    shorter = next(p for p in papers[10:] if len(per_paper[p["id"]]) >= 2)
    dropped = per_paper[shorter["id"]][-1]["id"]
    shorter["metadata"]["chunks"] -= 1
    for paper in papers[5:10]:
        paper["document"] += " (revised)"
    added = []
    for paper in papers[:5]:
        new_id = f"{paper['id']}-copy"
        for chunk in per_paper[paper["id"]]:
            added.append(dict(chunk, id=chunk["id"].replace(paper["id"], new_id),
                              metadata=dict(chunk["metadata"], doc_id=new_id)))
        added.append(dict(paper, id=new_id))
    kept = [c for c in chunks if c["id"] != dropped]
    path = _save(tmp_path / "edited.jsonl.gz", manifest,
                 kept + [r for r in added if r["kind"] == "chunk"] + papers + [r for r in added if r["kind"] == "paper"])
    return path, shorter["id"], dropped


def test_reimporting_a_paper_replaces_its_old_chunks(exported, seed_storage, tmp_path, capsys):
    path, paper, dropped = _edited(exported, tmp_path)
    store = _copy_store(seed_storage, tmp_path)
    code, out, err = _import(store, path, capsys)
    assert code == 0, err
    after = _snapshot(store)
    assert dropped not in after["_chunks"], "a replaced paper's chunk that the file lacks is gone"
    _, manifest_records = _load(path)
    file_ids = {r["id"] for r in manifest_records}
    assert set(after["_chunks"]) | set(after["_papers"]) == file_ids
    assert main(["--storage", str(store), "doctor"]) == 0
    assert "healthy" in capsys.readouterr().out


@pytest.mark.parametrize("phase", ["chunks", "papers"])
def test_a_failure_in_the_middle_of_the_write_leaves_the_store_as_it_was(
        exported, seed_storage, tmp_path, capsys, monkeypatch, phase):
    path, _, _ = _edited(exported, tmp_path)
    store = _copy_store(seed_storage, tmp_path)
    before = _snapshot(store)
    _, records = _load(path)
    chunk_batches = -(-sum(r["kind"] == "chunk" for r in records) // 10)
    fail_at = 2 if phase == "chunks" else chunk_batches + 2  # the 2nd batch of chunks, or of papers
    calls = []
    real_upsert = Collection.upsert

    def upsert(self, *args, **kwargs):
        calls.append(self.name)
        if len(calls) == fail_at:
            raise sqlite3.OperationalError("database is locked")
        return real_upsert(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", upsert)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where the import saves what it replaces
    with pytest.raises(StoreError) as failed:  # 10 records per write: several batches of each kind
        import_collection(PaperIndex(Settings(storage=store)), path, write_batch=10)
    lines = str(failed.value).splitlines()
    assert len(lines) == 1, lines
    assert "database is locked" in lines[0] and "disk full" not in lines[0], "the error names the real cause"
    assert "put back as it was" in lines[0]
    assert calls[fail_at - 1].endswith(f"_{phase}"), calls
    _assert_same(_snapshot(store), before)
    assert not list(scratch.iterdir()), "the backup is removed once the store is restored"
    monkeypatch.setattr(Collection, "upsert", real_upsert)
    assert main(["--storage", str(store), "doctor"]) == 0
    capsys.readouterr()
    code, out, err = _import(store, path, capsys)  # once the cause is gone, the same import succeeds
    assert code == 0 and "Imported 43 papers (38 replaced)" in out, out + err


def test_a_store_that_refuses_the_first_write_is_left_unchanged(exported, seed_storage, tmp_path, capsys,
                                                                 monkeypatch):
    path, _, _ = _edited(exported, tmp_path)
    store = _copy_store(seed_storage, tmp_path)
    before = _snapshot(store)

    def refuse(self, *args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    for method in ("modify", "upsert", "delete"):
        monkeypatch.setattr(Collection, method, refuse)
    code, _, err = _import(store, path, capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1 and len(lines) == 1, err
    assert "readonly database" in lines[0] and "before anything was written" in lines[0] and "unchanged" in lines[0]
    monkeypatch.undo()
    _assert_same(_snapshot(store), before)


def test_terminal_escapes_in_an_imported_file_are_never_stored(exported, tmp_path, capsys):
    """An imported file is someone else's text: its escape sequences and control characters are dropped as an
    ingest drops them, so `rag-bot ask` and the exports never hand them to a terminal (issue 35)."""
    manifest, records = _load(exported)
    paper = next(r for r in records if r["kind"] == "paper")
    paper["metadata"]["title"] = "\x1b]0;pwned\x07\x1b[31mRed title\x1b[0m"
    paper["document"] = "\x1b[2J" + paper["document"] + "\x07"
    path = _save(tmp_path / "escapes.jsonl.gz", manifest, records)
    store = tmp_path / "store"
    code, _, err = _import(store, path, capsys)
    assert code == 0, err
    [stored] = PaperIndex(Settings(storage=store)).papers_by_id([paper["id"]])
    assert stored.title == "Red title"
    assert "\x1b" not in stored.text and "\x07" not in stored.text and stored.text.strip()
