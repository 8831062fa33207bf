"""The store survives faults (issue 10): a failed write keeps the previous index serving with no orphan chunks,
a damaged store is one line with the recovery, `rag-bot doctor` checks, `rag-bot ingest --rebuild` recovers, and a
server URL's credentials are never shown."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from chromadb.api.models.Collection import Collection

from rag_bot.engine import Engine
from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.chroma import store_label
from rag_bot.store.index import PaperIndex
from rag_bot.surfaces.cli import main
from tests.conftest import SEEDS, run_main

BIN = Path(sys.executable).parent
QUESTION = "How can federated LoRA fix rotational misalignment of client updates before averaging?"


def _orphans(index: PaperIndex) -> set[str]:
    return set(index.chunk_paper_ids()) - set(index.fingerprints())


def _run(args: list[str], storage: Path, prefix: list[str] | None = None,
         **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), **extra)
    return subprocess.run([*(prefix or []), str(BIN / "rag-bot"), *args], env=env, capture_output=True, text=True,
                          timeout=240, cwd=storage.parent)


def _one_line(stream: str) -> str:
    lines = [line for line in stream.splitlines() if line.strip()]
    assert len(lines) == 1, stream
    assert "Traceback" not in stream
    return lines[0]


@pytest.mark.parametrize("where", ["chunks", "papers"])
def test_disk_full_mid_ingest_keeps_the_previous_index_and_a_rerun_finishes(
    tmp_path: Path, seed_list, embedder, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    storage = tmp_path / "store"
    index = PaperIndex(Settings(storage=storage), embedder=embedder)
    index.ingest(seed_list[:3], batch_papers=2)
    before = (index.count(), index.chunk_count())

    real = Collection.upsert
    calls = {"n": 0}

    def disk_full(self, *args, **kwargs):
        if self.name.endswith(f"_{where}"):
            calls["n"] += 1
            if calls["n"] == 2:  # the second batch: the first one of this ingest is already committed
                raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "upsert", disk_full)
    with pytest.raises(StoreError) as info:
        index.ingest(seed_list[:9], batch_papers=2)
    message = str(info.value)
    assert message.startswith("the store could not be written (disk full?): [Errno 28] No space left on device")
    assert "\n" not in message and str(storage) in message and "run the same ingest again" in message
    monkeypatch.setattr(Collection, "upsert", real)

    # The index keeps serving, consistent: committed papers only, none of the failed batch's chunks visible.
    assert index.count() >= before[0]
    assert not _orphans(index)
    engine = Engine(Settings(storage=storage), index=index)
    assert engine.stats()["papers"] == index.count()
    assert engine.ask("What does the collection say about federated learning?").answer

    # A later ingest (the fault gone) completes the interrupted papers, and matches a clean build.
    report = PaperIndex(Settings(storage=storage), embedder=embedder).ingest(seed_list[:9], batch_papers=2)
    assert report.added + report.unchanged == 9
    reference = PaperIndex(Settings(storage=tmp_path / "reference"), embedder=embedder)
    reference.ingest(seed_list[:9], batch_papers=2)
    again = PaperIndex(Settings(storage=storage), embedder=embedder)
    assert sorted(again.fingerprints()) == sorted(reference.fingerprints())
    assert again.chunk_count() == reference.chunk_count()
    assert not _orphans(again) and again.health().healthy


_FILL_THE_DISK = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from rag_bot.surfaces.cli import main
storage = Path(sys.argv[1])
limit = (storage / "chroma.sqlite3").stat().st_size + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))  # writes past it fail: a full disk
sys.exit(main(["ingest", "--quiet", sys.argv[3]]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("room", [50_000, 300_000])
def test_a_real_write_failure_is_one_line_and_stats_ask_and_a_rerun_work(
    tmp_path: Path, seed_list, room: int, monkeypatch, capsys
) -> None:
    """A real failing write (the file-size limit makes sqlite's writes fail like a full disk does). The failing
    ingest and the first question after it run as fresh processes; the other commands through cli.main here (an
    interpreter start is 3-4 s)."""
    storage = tmp_path / "store"
    first = tmp_path / "first.txt"
    first.write_text("ICML 2026 Papers\n\n" + "\n\n".join(p.text for p in seed_list[:4]) + "\n")
    assert run_main(monkeypatch, capsys, storage, "ingest", "--quiet", str(first))[0] == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(storage)
    full = subprocess.run([sys.executable, "-c", _FILL_THE_DISK, str(storage), str(room), str(SEEDS)], env=env,
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert full.returncode == 1, full.stderr
    line = [x for x in full.stderr.splitlines() if x.startswith("rag-bot:")]
    assert len(line) == 1 and "Traceback" not in full.stderr
    assert line[0].startswith("rag-bot: the store could not be written (disk full?):")

    code, _, err = run_main(monkeypatch, capsys, storage, "stats", "--json")
    assert code == 0, err
    index = PaperIndex(Settings(storage=storage))
    assert not _orphans(index), "chunks of unfinished papers must not remain"
    assert index.count() >= 4
    ask = _run(["ask", "--json", QUESTION], storage)
    assert ask.returncode == 0, ask.stderr
    code, _, err = run_main(monkeypatch, capsys, storage, "ingest", "--quiet", str(SEEDS))
    assert code == 0, err
    code, out, _ = run_main(monkeypatch, capsys, storage, "doctor")
    assert code == 0 and "healthy" in out, out


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
    from tests.conftest import free_port

    url = f"http://alice:s3cret@127.0.0.1:{free_port()}"
    assert "s3cret" not in store_label(Settings(chroma_url=url))
    assert "127.0.0.1" in store_label(Settings(chroma_url=url))
    monkeypatch.setenv("RAG_BOT_CHROMA_URL", url)
    for args in (["stats"], ["doctor"]):
        main(args)
        captured = capsys.readouterr()
        assert "s3cret" not in captured.out + captured.err and "alice" not in captured.out + captured.err
    monkeypatch.setenv("RAG_BOT_CHROMA_URL", "ftp://bob:hunter2@host:1")
    # Refused when the settings are read (a ValueError naming the variable) or, at the latest, when the store opens.
    with pytest.raises((StoreError, ValueError)) as info:
        PaperIndex(Settings())
    assert "hunter2" not in str(info.value)


# --- a store the user may not write (issue 19) ----------------------------------------------------------------
def _as_a_user_chmod_binds() -> list[str]:
    """A command prefix under which file permissions hold: root writes through any chmod (CAP_DAC_OVERRIDE), so
    as root the command runs with that capability dropped from its bounding set (util-linux `setpriv`); another
    user needs nothing."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: chmod cannot make a file read-only to root")
    return [setpriv, "--bounding-set", "-dac_override"]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("what", ["folder", "file"])
def test_a_read_only_store_says_to_fix_the_permissions_not_to_rebuild(
    tmp_path: Path, small_store: Path, what: str
) -> None:
    """A real read-only store: chmod on a copy (the whole folder, or only chroma.sqlite3), with the commands run
    where chmod binds (see _as_a_user_chmod_binds); each command's one line names the permissions and the fix, never
    `--rebuild`, and a rebuild of a read-only folder moves nothing (of a read-only file in a writable folder, it
    works: the file is moved aside whole)."""
    storage = tmp_path / "store"
    shutil.copytree(small_store, storage)
    corpus = tmp_path / "mini.txt"
    shutil.copy(SEEDS / sorted(os.listdir(SEEDS))[0], corpus)
    targets = [storage, *storage.rglob("*")] if what == "folder" else [storage / "chroma.sqlite3"]
    modes = {p: p.stat().st_mode for p in targets}
    before = _files(storage)
    commands = [["ask", QUESTION], ["ingest", "--quiet", str(corpus)]]
    if what == "folder":
        commands.append(["ingest", "--rebuild", "--quiet", str(corpus)])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(storage)
    prefix = _as_a_user_chmod_binds()
    for path, mode in modes.items():
        path.chmod(mode & ~0o222)
    try:  # the commands run side by side (each fails at open): seconds, not one start-up after another
        procs = [subprocess.Popen([*prefix, str(BIN / "rag-bot"), *args], env=env, cwd=tmp_path, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for args in commands]
        results = [(args, *proc.communicate(timeout=240)) for args, proc in zip(commands, procs)]
    finally:
        for path, mode in modes.items():
            path.chmod(mode)
    for args, out, err in results:
        line = _one_line(err)
        assert line.startswith(f"rag-bot: the store in the folder {storage} cannot be written: permission "
                               f"denied"), (args, out, err)
        assert f"chmod -R u+w {storage}" in line and "ingest --rebuild" not in line, line
    assert [proc.returncode for proc in procs] == [1] * len(procs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mini.txt", "store"], "nothing set aside"
    assert _files(storage) == before


# --- a Chroma server that dies (issue 19) ---------------------------------------------------------------------
@pytest.fixture
def killable_chroma(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A real `chroma run` server on a free port: (port, its process, for the test to kill). The caches of a
    server's collection (lexicon, map) go to XDG_CACHE_HOME: a temporary folder here."""
    from tests.conftest import free_port
    from tests.store.test_index import _wait_heartbeat

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "chroma"), "run", "--path", str(tmp_path / "server-data"), "--host", "127.0.0.1", "--port",
         str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_heartbeat(port, proc)
        yield port, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _server_store(tmp_path: Path, port: int, seed_list, embedder) -> Settings:
    """Settings of a store on the server (a URL with credentials, which must never be shown), four seeds in it."""
    settings = Settings(chroma_url=f"http://alice:s3cret@127.0.0.1:{port}", storage=tmp_path / "unused",
                        data=tmp_path / "data")
    PaperIndex(settings, embedder=embedder).ingest(seed_list[10:14])
    return settings


UNREACHABLE = "cannot reach the Chroma server at http://***@127.0.0.1:{}: it is unreachable"


@pytest.mark.slow
def test_a_chroma_server_killed_mid_batch_fails_each_question_in_one_line_and_the_batch_goes_on(
    tmp_path: Path, seed_list, embedder, killable_chroma
) -> None:
    import json
    import selectors

    port, server = killable_chroma
    settings = _server_store(tmp_path, port, seed_list, embedder)
    batch = tmp_path / "questions.txt"
    questions = [QUESTION, *(f"What does the collection say about {topic}?" for topic in
                             ("federated learning", "LoRA adapters", "client drift", "model averaging", "privacy"))]
    batch.write_text("\n".join(questions) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_CHROMA_URL=str(settings.chroma_url), RAG_BOT_STORAGE=str(settings.storage))
    proc = subprocess.Popen([str(BIN / "rag-bot"), "ask", "--json", "--batch", str(batch)], env=env, cwd=tmp_path,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        assert selector.select(timeout=180), "no first answer within 180 s"
        first = proc.stdout.readline()  # type: ignore[union-attr]
        server.kill()  # mid-batch: the first answer is out, the next questions meet a dead server
        server.wait()
        rest, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    objects = [json.loads(line) for line in (first + rest).splitlines()]
    assert [o["question"] for o in objects] == questions, "one object per question, in order"
    assert "answer" in objects[0] and "error" not in objects[0]
    failed = [o for o in objects if "error" in o]
    assert len(failed) >= 4 and objects[-len(failed):] == failed, "every question after the kill fails"
    for o in failed:
        assert set(o) == {"question", "error"} and o["error"].startswith(UNREACHABLE.format(port)), o
    lines = [line for line in err.splitlines() if line.strip()]
    reported = [line for line in lines if line.startswith("rag-bot: question ")]
    assert len(reported) == len(failed) and all(f" of {len(questions)} failed: " + UNREACHABLE.format(port) in line
                                                for line in reported), lines
    assert "Traceback" not in err and "unexpected error" not in err
    assert "s3cret" not in rest + err + first


@pytest.mark.slow
def test_a_chroma_server_killed_under_serve_is_the_store_message_in_the_chat_and_503_on_v1(
    tmp_path: Path, seed_list, embedder, killable_chroma
) -> None:
    import gradio as gr
    import httpx

    from rag_bot.surfaces.api import create_api
    from rag_bot.surfaces.ui.base import Library, Shared
    from rag_bot.surfaces.ui.chat import ChatPanel
    from rag_bot.surfaces.ui.sources import SourcesPanel
    from tests.surfaces.test_api import _serve

    port, server = killable_chroma
    settings = _server_store(tmp_path, port, seed_list, embedder)
    engine = Engine(settings, index=PaperIndex(settings, embedder=embedder))
    library = Library(engine)
    with gr.Blocks():
        sources = SourcesPanel(library)
        chat = ChatPanel(library, sources, Shared(status=gr.Markdown(), turns=gr.State([])))
        chat.render()
        sources.render()
    base, api, thread = _serve(create_api(engine))
    body = {"model": "rag-bot", "messages": [{"role": "user", "content": QUESTION}]}
    try:
        assert httpx.post(f"{base}/chat/completions", json=body, timeout=120).status_code == 200
        server.kill()
        server.wait()
        for stream in (False, True):
            reply = httpx.post(f"{base}/chat/completions", json=body | {"stream": stream}, timeout=120)
            assert reply.status_code == 503, (stream, reply.text)
            error = reply.json()["error"]
            assert error["code"] == "store_unavailable" and error["message"].startswith(UNREACHABLE.format(port))
            assert "s3cret" not in reply.text
    finally:
        api.should_exit = True
        thread.join(timeout=10)
    with pytest.warns(UserWarning, match="^" + UNREACHABLE.format(port).replace("*", r"\*")):
        updates = list(chat.respond(QUESTION, [], [], "Auto", 6))
    shown = updates[-1][chat.chatbot][-1]["content"]
    assert UNREACHABLE.format(port) in shown and "Sorry" not in shown and "s3cret" not in shown
    with pytest.raises(gr.Error, match="cannot reach the Chroma server"):
        chat.ask_api()(QUESTION)


def test_a_request_too_large_for_the_store_is_not_called_damage(engine) -> None:
    """SQLite refuses a query of more than 32,766 variables: the user is told the request was too large and the
    store needs no repair, not to run `doctor` on a healthy store."""
    from rag_bot.errors import StoreError

    with pytest.raises(StoreError) as caught:
        engine.index.papers.get(ids=[f"no-such-paper-{n}" for n in range(40_000)], include=[])
    message = str(caught.value)
    assert "too large" in message and "needs no repair" in message and "doctor" not in message
    assert engine.index.count() == 38
