"""The store survives faults (issue 10): a failed write keeps the previous index serving with no orphan chunks,
a damaged store is one line with the recovery, `rag-bot doctor` checks, `rag-bot ingest --rebuild` recovers, and a
server URL's credentials are never shown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from chromadb.api.models.Collection import Collection

import rag_bot.index as index_module
from rag_bot.cli import main
from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.index import PaperIndex, store_label
from rag_bot.settings import Settings

from .conftest import SEEDS

BIN = Path(sys.executable).parent
QUESTION = "How can federated LoRA fix rotational misalignment of client updates before averaging?"


def _orphans(index: PaperIndex) -> set[str]:
    return set(index.chunk_paper_ids()) - set(index.fingerprints())


def _run(args: list[str], storage: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), **extra)
    return subprocess.run([str(BIN / "rag-bot"), *args], env=env, capture_output=True, text=True, timeout=240,
                          cwd=storage.parent)


def _one_line(stream: str) -> str:
    lines = [line for line in stream.splitlines() if line.strip()]
    assert len(lines) == 1, stream
    assert "Traceback" not in stream
    return lines[0]


@pytest.mark.parametrize("where", ["chunks", "papers"])
def test_disk_full_mid_ingest_keeps_the_previous_index_and_a_rerun_finishes(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setattr(index_module, "BATCH_PAPERS", 2)
    storage = tmp_path / "store"
    index = PaperIndex(Settings(storage=storage), embedder=embedder)
    index.ingest(seed_list[:3])
    before = (index.count(), index.chunk_count())

    real = Collection.add if where == "chunks" else Collection.upsert
    calls = {"n": 0}

    def disk_full(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:  # the second batch: the first one of this ingest is already committed
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "add" if where == "chunks" else "upsert", disk_full)
    with pytest.raises(StoreError) as info:
        index.ingest(seed_list[:9])
    message = str(info.value)
    assert message.startswith("the store could not be written (disk full?): [Errno 28] No space left on device")
    assert "\n" not in message and str(storage) in message and "run the same ingest again" in message
    monkeypatch.setattr(Collection, "add" if where == "chunks" else "upsert", real)

    # The index keeps serving, consistent: committed papers only, none of the failed batch's chunks visible.
    assert index.count() >= before[0]
    assert not _orphans(index)
    engine = Engine(Settings(storage=storage), index=index)
    assert engine.stats()["papers"] == index.count()
    assert engine.ask("What does the collection say about federated learning?").answer

    # A later ingest (the fault gone) completes the interrupted papers, and matches a clean build.
    report = PaperIndex(Settings(storage=storage), embedder=embedder).ingest(seed_list[:9])
    assert report.added + report.unchanged == 9
    reference = PaperIndex(Settings(storage=tmp_path / "reference"), embedder=embedder)
    reference.ingest(seed_list[:9])
    again = PaperIndex(Settings(storage=storage), embedder=embedder)
    assert sorted(again.fingerprints()) == sorted(reference.fingerprints())
    assert again.chunk_count() == reference.chunk_count()
    assert not _orphans(again) and again.health().healthy


_FILL_THE_DISK = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from rag_bot.cli import main
storage = Path(sys.argv[1])
limit = (storage / "chroma.sqlite3").stat().st_size + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # writes past it fail: a full disk
sys.exit(main(["ingest", "--quiet", sys.argv[3]]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("room", [50_000, 300_000])
def test_a_real_write_failure_is_one_line_and_stats_ask_and_a_rerun_work(
    tmp_path: Path, seed_list, room: int
) -> None:
    """A real failing write (the file-size limit makes sqlite's writes fail like a full disk does)."""
    storage = tmp_path / "store"
    first = tmp_path / "first.txt"
    first.write_text("ICML 2026 Papers\n\n" + "\n\n".join(p.text for p in seed_list[:4]) + "\n")
    assert _run(["ingest", "--quiet", str(first)], storage).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(storage)
    full = subprocess.run([sys.executable, "-c", _FILL_THE_DISK, str(storage), str(room), str(SEEDS)], env=env,
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert full.returncode == 1, full.stderr
    line = [x for x in full.stderr.splitlines() if x.startswith("rag-bot:")]
    assert len(line) == 1 and "Traceback" not in full.stderr
    assert line[0].startswith("rag-bot: the store could not be written (disk full?):")

    stats = _run(["stats", "--json"], storage)
    assert stats.returncode == 0, stats.stderr
    index = PaperIndex(Settings(storage=storage))
    assert not _orphans(index), "chunks of unfinished papers must not remain"
    assert index.count() >= 4
    ask = _run(["ask", "--json", QUESTION], storage)
    assert ask.returncode == 0, ask.stderr
    rerun = _run(["ingest", "--quiet", str(SEEDS)], storage)
    assert rerun.returncode == 0, rerun.stderr
    doctor = _run(["doctor"], storage)
    assert doctor.returncode == 0 and "healthy" in doctor.stdout, doctor.stdout


def test_orphan_chunks_are_removed_on_open(tmp_path: Path, seed_list, embedder) -> None:
    storage = tmp_path / "store"
    index = PaperIndex(Settings(storage=storage), embedder=embedder)
    index.ingest(seed_list[:3])
    n = index.chunk_count()
    gone = seed_list[1].doc_id
    index.papers.delete(ids=[gone])  # as a failed write leaves it: chunks written, no paper record
    assert _orphans(index) == {gone}
    assert not index.health().healthy
    reopened = PaperIndex(Settings(storage=storage), embedder=embedder)
    assert not _orphans(reopened)
    assert reopened.chunk_count() == n - len(index.chunk_nodes(seed_list[1]))
    assert reopened.health().healthy


def _garble(storage: Path, how: str) -> None:
    db = storage / "chroma.sqlite3"
    with open(db, "r+b") as f:
        if how == "junk":
            f.write(b"\x5a\xa5" * 2048)  # the first 4 KB
        else:
            f.truncate(db.stat().st_size // 2)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, seed_list) -> Path:
    storage = tmp_path_factory.mktemp("small") / "store"
    Engine(Settings(storage=storage)).index.ingest(seed_list[:3])
    return storage


@pytest.mark.parametrize("how", ["junk", "truncated"])
def test_a_damaged_store_is_one_line_with_the_recovery_and_rebuild_recovers(
    tmp_path: Path, small_store: Path, how: str
) -> None:
    storage = tmp_path / "store"
    subprocess.run(["cp", "-r", str(small_store), str(storage)], check=True)
    _garble(storage, how)

    with pytest.raises(StoreError) as info:
        Engine(Settings(storage=storage))
    assert str(storage) in str(info.value) and "rag-bot ingest --rebuild" in str(info.value)

    for args in (["stats"], ["ask", QUESTION], ["ingest", "--quiet", str(SEEDS)]):
        result = _run(args, storage)
        assert result.returncode == 1, (args, result.stderr)
        line = _one_line(result.stderr)
        assert line.startswith(f"rag-bot: the store in the folder {storage} ")
        assert "rag-bot doctor" in line and "rag-bot ingest --rebuild" in line

    doctor = _run(["doctor"], storage)
    assert doctor.returncode == 1
    assert "problem:" in doctor.stdout and "rag-bot ingest --rebuild" in doctor.stdout
    assert "Traceback" not in doctor.stdout + doctor.stderr

    garbled = (storage / "chroma.sqlite3").read_bytes()
    corpus = tmp_path / "mini.txt"
    subprocess.run(["cp", str(SEEDS / sorted(os.listdir(SEEDS))[0]), str(corpus)], check=True)
    rebuild = _run(["ingest", "--rebuild", "--quiet", str(corpus)], storage)
    assert rebuild.returncode == 0, rebuild.stderr
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("store.broken-")]
    assert len(aside) == 1 and "moved the old store to" in rebuild.stderr and str(aside[0]) in rebuild.stderr
    assert (aside[0] / "chroma.sqlite3").read_bytes() == garbled, "the user's data is kept, never deleted"
    assert _run(["stats"], storage).returncode == 0
    doctor = _run(["doctor"], storage)
    assert doctor.returncode == 0 and "healthy" in doctor.stdout


def test_doctor_on_a_healthy_store_exits_0(small_store: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_BOT_STORAGE", str(small_store))
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert f"store: folder {small_store}" in out and "papers: 3," in out and "healthy" in out


def test_credentials_in_the_chroma_url_are_never_shown(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from .conftest import free_port

    url = f"http://alice:s3cret@127.0.0.1:{free_port()}"
    assert "s3cret" not in store_label(Settings(chroma_url=url))
    assert "127.0.0.1" in store_label(Settings(chroma_url=url))
    monkeypatch.setenv("RAG_BOT_CHROMA_URL", url)
    for args in (["stats"], ["doctor"]):
        main(args)
        captured = capsys.readouterr()
        assert "s3cret" not in captured.out + captured.err and "alice" not in captured.out + captured.err
    monkeypatch.setenv("RAG_BOT_CHROMA_URL", "ftp://bob:hunter2@host:1")
    with pytest.raises(StoreError) as info:
        PaperIndex(Settings())
    assert "hunter2" not in str(info.value)
