"""A store on a real small disk (tmpfs, issue 35): a disk that fills during an ingest leaves the old index serving
and whole vector files; a store on a read-only mount is told as such; an import killed with SIGKILL leaves no
backup behind once the next command runs. These mount file systems: they need root, else they skip. Vector files
that a killed ingest left cut short are put back by the next command (no mount needed)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.index import PaperIndex
from tests.conftest import SEEDS, SHARED

BIN = Path(sys.executable).parent
ABSTRACTS = SHARED / "data" / "ml_abstracts.jsonl.gz"
QUESTION = "How can federated LoRA fix rotational misalignment of client updates before averaging?"


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs mounted on a fresh folder (unmounted after); skips where mounting is not allowed."""
    where = Path("/tmp") / f"rag-bot-tmpfs-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(where)], capture_output=True)
    if made.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


def _resize(where: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)


def _env(storage: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), **extra)
    return env


def _run(args: list[str], storage: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = _env(storage, **extra)
    return subprocess.run([str(BIN / "rag-bot"), *args], env=env, capture_output=True, text=True, timeout=300,
                          cwd=storage.parent)


def _cut_short_pickles(storage: Path) -> list[Path]:
    """HNSW metadata files a failed rewrite left cut short (every pickle ends with its STOP byte, ".")."""
    return [p for p in storage.glob("*/index_metadata.pickle") if not p.read_bytes().endswith(b".")]


def _error_line(stream: str) -> str:
    lines = [line for line in stream.splitlines() if line.startswith("rag-bot:")]
    assert len(lines) == 1 and "Traceback" not in stream, stream
    return lines[0]


@pytest.mark.slow
def test_a_disk_that_fills_during_an_ingest_keeps_the_old_index_and_whole_vector_files(
    mount: Path, seed_storage: Path
) -> None:
    """The reported case, sized so the disk fills while Chroma rewrites the chunks' HNSW files (measured: an
    8.5 MB tmpfs, the seeds' store and 1,200 real abstracts: 1,848 chunks, rewritten at the 1,000th)."""
    if not ABSTRACTS.exists():
        pytest.skip(f"{ABSTRACTS} (real abstracts sized to fill the disk mid-rewrite) is not here")
    storage = mount / "store"
    shutil.copytree(seed_storage, storage)
    papers = mount.parent / f"{mount.name}-papers.jsonl"  # outside the small disk
    with gzip.open(ABSTRACTS, "rt", encoding="utf-8") as src:
        lines = [src.readline() for _ in range(2000)][800:]
    papers.write_text("".join(lines))
    try:
        _resize(mount, "8500k")
        index = PaperIndex(Settings(storage=storage))
        before = index.count()
        from rag_bot.reading.corpus import read_paths

        with pytest.raises(StoreError) as info:
            index.ingest(read_paths([papers]).papers)
        assert "\n" not in str(info.value) and "could not be written" in str(info.value)
        assert not _cut_short_pickles(storage), "no vector file left damaged"

        # The old papers still answer, in this process and (space freed) in a fresh one, with no rebuild.
        assert index.count() >= before
        from rag_bot.engine import Engine

        answer = Engine(Settings(storage=storage), index=index).ask(QUESTION)
        assert answer.answer and answer.citations
        _resize(mount, "64m")
        stats = _run(["stats"], storage)
        assert stats.returncode == 0, stats.stderr
        ask = _run(["ask", "--json", QUESTION], storage)
        assert ask.returncode == 0 and '"citations"' in ask.stdout, ask.stderr
        rerun = _run(["ingest", "--quiet", str(papers)], storage)
        assert rerun.returncode == 0, rerun.stderr
        doctor = _run(["doctor"], storage)
        assert doctor.returncode == 0 and "healthy" in doctor.stdout, doctor.stdout
        assert "papers: 1238," in doctor.stdout
    finally:
        papers.unlink(missing_ok=True)


def test_a_store_on_a_read_only_mount_says_so_not_chmod(mount: Path, seed_storage: Path) -> None:
    """Chroma 1.5.9 writes to its file to open a store, so a read-only mount cannot be read either: every command
    says the file system is read-only (no chmod fixes that) and that the store needs no rebuild."""
    storage = mount / "store"
    shutil.copytree(seed_storage, storage)
    corpus = mount.parent / f"{mount.name}-mini.txt"
    shutil.copy(SEEDS / sorted(os.listdir(SEEDS))[0], corpus)
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    try:
        for args in (["stats"], ["ask", QUESTION], ["ingest", "--quiet", str(corpus)]):
            result = _run(args, storage)
            assert result.returncode == 1, (args, result.stderr)
            line = _error_line(result.stderr)
            assert line.startswith(f"rag-bot: the store in the folder {storage} is on a read-only file system"), line
            assert "chmod" not in line and "needs no rebuild" in line and "remount it read-write" in line
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=True)
        corpus.unlink(missing_ok=True)


def test_an_import_killed_with_sigkill_leaves_no_backup_after_the_next_command(
    seed_storage: Path, tmp_path: Path
) -> None:
    """The import's backup (what it replaces) is named by its process; once that process is gone, the next
    command deletes it, wherever it was written (the temporary folder is watched too)."""
    storage = tmp_path / "store"
    shutil.copytree(seed_storage, storage)
    export = tmp_path / "seeds.ragbot.jsonl.gz"
    assert _run(["export", str(export)], storage).returncode == 0
    temp = tmp_path / "temp"
    temp.mkdir()
    env = _env(storage, TMPDIR=str(temp))

    def backups() -> list[Path]:
        return [*storage.glob("rag-bot-import-*"), *temp.glob("rag-bot-import-*")]

    proc = subprocess.Popen([str(BIN / "rag-bot"), "import", "--quiet", str(export)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not backups() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert backups(), "the import wrote no backup (it replaces every paper of the file)"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert backups(), "killed mid-import: its backup is still there"
    stats = subprocess.run([str(BIN / "rag-bot"), "stats"], env=env, capture_output=True, text=True, timeout=240)
    assert stats.returncode == 0, stats.stderr
    assert backups() == [], "the next command deletes a killed import's backup"


# Chunks of 8 tokens: the 38 seed abstracts give 1,265 chunk vectors, past the 1,000 at which Chroma 1.5.9 first
# writes a collection's HNSW files (at the default 160 the seeds' 80 chunks live in its log only: header-only files).
SMALL_CHUNKS = {"RAG_BOT_CHUNK_SIZE": "8", "RAG_BOT_CHUNK_OVERLAP": "0"}


@pytest.fixture(scope="module")
def written_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeds indexed in chunks small enough that the chunks' HNSW files hold every vector (1,265)."""
    from rag_bot.engine import Engine

    storage = tmp_path_factory.mktemp("written-store") / "store"
    Engine(Settings(storage=storage, chunk_size=8, chunk_overlap=0)).ingest([SEEDS])
    return storage


def _cut_as_a_killed_rewrite(storage: Path) -> list[Path]:
    """Cut the HNSW files of every segment that has them as a rewrite cut off leaves them (the sizes measured on
    the full 8.5 MB tmpfs: rag_bot/store/segments.py); returns the folders cut."""
    cut = []
    for pickle in storage.glob("*/index_metadata.pickle"):
        folder = pickle.parent
        assert (folder / "data_level0.bin").stat().st_size > 917_504, "these files hold more than the cut"
        for name, size in (("index_metadata.pickle", 0), ("data_level0.bin", 917_504), ("length.bin", 4_096),
                           ("link_lists.bin", 0)):
            os.truncate(folder / name, size)
        cut.append(folder)
    assert cut, "the store has HNSW files to cut"
    return cut


def _other_papers(path: Path, n: int) -> int:
    """`n` papers not in the store, made from the seeds (their sentences in reverse order, new titles)."""
    from rag_bot.reading.corpus import read_paths

    rows = [{"id": f"revisited-{i}", "title": f"Revisited {i}: {paper.title}",
             "abstract": ". ".join(reversed(paper.text.rstrip(".").split(". "))) + "."}
            for i, paper in enumerate(read_paths([SEEDS]).papers[:n])]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return len(rows)


# A known, intermittent recovery bug, not yet found: now and then (2 of 6 runs under load, 1 of 3 fresh-clone CI runs
# on 2026-12-04) the store put back after a killed ingest answers "Error finding id" to the first read. Kept running
# and reported (XFAIL / XPASS), not strict, so one unlucky run does not hide a whole suite; docs/eval.md has the
# state of the search.
@pytest.mark.xfail(strict=False, reason="intermittent 'Error finding id' after the vector files are put back "
                   "(a known recovery bug, not yet found)")
def test_vector_files_a_killed_ingest_left_cut_short_are_put_back_by_doctor(
    written_store: Path, tmp_path: Path
) -> None:
    """An ingest killed while Chroma rewrote the chunks' HNSW files: `rag-bot doctor` puts them back from the copy
    the ingest saved before its first write, and the store answers, counts and ingests again with no rebuild."""
    storage = tmp_path / "store"
    shutil.copytree(written_store, storage)
    before = json.loads(_run(["stats", "--json"], storage, **SMALL_CHUNKS).stdout)["papers"]
    papers = tmp_path / "other.jsonl"
    added = _other_papers(papers, 10)
    saved = storage / "rag-bot-vectors.saved" / "seq_ids.json"
    proc = subprocess.Popen([str(BIN / "rag-bot"), "ingest", "--quiet", str(papers)], env=_env(storage, **SMALL_CHUNKS),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while not saved.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert saved.exists(), "the ingest saved no copy of the vector files before its first write"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    cut = _cut_as_a_killed_rewrite(storage)

    doctor = _run(["doctor"], storage, **SMALL_CHUNKS)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    repaired = [line for line in doctor.stdout.splitlines() if line.startswith("repaired: ")]
    assert len(repaired) == len(cut) and "_chunks (data_level0.bin is 917,504 bytes" in repaired[0], doctor.stdout
    assert not _cut_short_pickles(storage)

    ask = _run(["ask", "--json", QUESTION], storage, **SMALL_CHUNKS)
    assert ask.returncode == 0 and "Traceback" not in ask.stderr, ask.stderr
    assert json.loads(ask.stdout)["citations"], ask.stdout
    stats = _run(["stats", "--json"], storage, **SMALL_CHUNKS)
    assert stats.returncode == 0 and before <= json.loads(stats.stdout)["papers"] <= before + added, stats.stderr
    rerun = _run(["ingest", "--quiet", str(papers)], storage, **SMALL_CHUNKS)
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(_run(["stats", "--json"], storage, **SMALL_CHUNKS).stdout)["papers"] == before + added


def test_vector_files_cut_short_with_no_copy_saved_are_one_line_naming_a_rebuild(
    written_store: Path, tmp_path: Path
) -> None:
    """The same damage with no copy to put back (the files were cut outside any ingest): doctor and a question
    each say so in one line naming `ingest --rebuild`, with no traceback."""
    storage = tmp_path / "store"
    shutil.copytree(written_store, storage)
    _cut_as_a_killed_rewrite(storage)
    doctor = _run(["doctor"], storage, **SMALL_CHUNKS)
    assert doctor.returncode == 1 and "Traceback" not in doctor.stdout + doctor.stderr, doctor.stderr
    problems = [line for line in doctor.stdout.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 1 and "rag-bot ingest --rebuild" in problems[0], doctor.stdout
    assert "_chunks (data_level0.bin is 917,504 bytes" in problems[0] and "damaged and no copy" in problems[0]
    ask = _run(["ask", QUESTION], storage, **SMALL_CHUNKS)
    assert ask.returncode == 1 and "rag-bot ingest --rebuild" in _error_line(ask.stderr)
