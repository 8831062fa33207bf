"""The real `rag-bot` console script, run in subprocesses as a user runs it (each test at least once; a test's
follow-up commands, and all but one case of a parametrized test, go through the same main in this process, `run_in`:
an interpreter start is 3-4 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_bot import answer_words as words
from rag_bot.text import clean_markup
from tests.conftest import SEEDS, paper_with, run_main

BIN = Path(sys.executable).parent
RAG_BOT = str(BIN / "rag-bot")
JSON_KEYS = {"question", "mode", "answer", "grounded", "certainty", "citations", "retrieved", "searched_for", "llm",
             "timings_ms"}
CITATION_KEYS = {"n", "doc_id", "title", "source", "quote", "support", "probability", "related"}


def _env(storage: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), GRADIO_ANALYTICS_ENABLED="False")
    return env


@pytest.fixture(scope="module")
def run(seed_storage, tmp_path_factory):
    """Run the console script against the seed store (from a scratch folder, so no .env is read)."""
    cwd = tmp_path_factory.mktemp("cli-cwd")

    def _run(*args: str, stdin: str | None = None, storage: Path | None = None,
             exe: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            (exe or [RAG_BOT]) + list(args), input=stdin, capture_output=True, text=True, timeout=180,
            env=_env(storage or seed_storage), cwd=cwd,
        )

    return _run


@pytest.fixture
def run_in(seed_storage, monkeypatch, capsys):
    """`run`'s commands through cli.main in this process, with the same environment; a CompletedProcess."""

    def _run(*args: str, storage: Path | None = None) -> subprocess.CompletedProcess[str]:
        code, out, err = run_main(monkeypatch, capsys, storage or seed_storage, *args,
                                  GRADIO_ANALYTICS_ENABLED="False")
        return subprocess.CompletedProcess(list(args), code, out, err)

    return _run


def _objects(stdout: str) -> list[dict]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def _check_contract(obj: dict) -> None:
    assert set(obj) == JSON_KEYS
    assert obj["mode"] in ("ask", "summary", "compare")
    assert isinstance(obj["answer"], str) and obj["answer"]
    assert isinstance(obj["grounded"], bool)
    assert obj["llm"] == "offline"
    for c in obj["citations"]:
        assert set(c) == CITATION_KEYS
        assert f"[{c['n']}]" in obj["answer"]
    assert [c["n"] for c in obj["citations"]] == list(range(1, len(obj["citations"]) + 1))
    retrieved = obj["retrieved"]
    assert 1 <= len(retrieved) <= 10
    assert all(set(r) == {"doc_id", "score"} for r in retrieved)
    scores = [r["score"] for r in retrieved]
    assert scores == sorted(scores, reverse=True), "retrieved is best first"
    assert len({r["doc_id"] for r in retrieved}) == len(retrieved)
    timings = obj["timings_ms"]
    assert set(timings) == {"retrieve", "compose", "total"}
    assert all(isinstance(v, (int, float)) and v >= 0 for v in timings.values())
    assert timings["total"] >= max(timings["retrieve"], timings["compose"])


def test_ask_json_prints_one_object_with_the_contract(run, engine):
    question = "what does CorrSteer gain on HarmBench?"
    proc = run("ask", "--json", question)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    objs = _objects(proc.stdout)
    assert len(objs) == 1
    obj = objs[0]
    _check_contract(obj)
    assert obj["question"] == question
    assert obj["mode"] == "ask"
    assert obj["grounded"] is True
    corrsteer = paper_with(engine, "CorrSteer")
    assert obj["citations"][0]["doc_id"] == corrsteer
    assert obj["retrieved"][0]["doc_id"] == corrsteer
    assert obj["citations"][0]["source"] == engine.retriever.papers[corrsteer].source
    assert "27.1" in obj["answer"]


def test_batch_file_prints_one_object_per_line_and_mode_override(run, tmp_path, engine):
    questions = ["Compare CorrSteer and SARSteer", "what does CorrSteer gain on HarmBench?"]
    batch = tmp_path / "questions.txt"
    batch.write_text(f"{questions[0]}\n\n   \n{questions[1]}\n", encoding="utf-8")
    proc = run("ask", "--json", "--mode", "summary", "--batch", str(batch))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2, "blank lines are skipped, one JSON object per question"
    objs = [json.loads(line) for line in lines]
    assert [o["question"] for o in objs] == questions
    for obj in objs:
        _check_contract(obj)
        assert obj["mode"] == "summary", "--mode overrides the detected mode"
        assert "|---" not in obj["answer"]


def test_batch_from_stdin(run):
    questions = ["Compare CorrSteer and SARSteer", "how does capkv work"]
    proc = run("ask", "--json", "--batch", "-", stdin="\n".join(questions) + "\n")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    objs = [json.loads(line) for line in lines]
    assert [o["question"] for o in objs] == questions
    assert [o["mode"] for o in objs] == ["compare", "ask"]
    for obj in objs:
        _check_contract(obj)
        assert obj["grounded"] is True


@pytest.mark.parametrize("question", ["", "   "], ids=["empty", "blank"])
def test_empty_question_exits_2_with_one_line_message(run, run_in, question):
    proc = (run if question == "" else run_in)("ask", question)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "empty" in lines[0]


def test_empty_store_tells_to_run_ingest(run, tmp_path):
    proc = run("ask", "--json", "what does CorrSteer do?", storage=tmp_path / "fresh-store")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "rag-bot ingest" in proc.stderr
    assert proc.stdout == ""


def test_stats_reports_the_38_seed_papers(run, seed_storage):
    proc = run("stats")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("38 papers, ")
    assert str(seed_storage) in lines[0]
    per_source = [int(line.rsplit(":", 1)[1]) for line in lines[2:] if line.startswith("  ")]
    assert sum(per_source) == 38 and len(per_source) == 2, "papers per seed file"


def test_ingest_warns_with_file_and_line_and_keeps_good_records(run, tmp_path):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    data = tmp_path / "tiny.jsonl"
    good = [
        {"id": "good-1", "title": "Frobnicating widgets with lattice sieves",
         "abstract": "We introduce WidgetSieve, a lattice sieve that frobnicates widgets in linear time and "
                     "beats prior sieves on three widget benchmarks."},
        {"id": "good-2", "title": "Counting pebbles with tiny robots",
         "abstract": "We present PebbleBot, a swarm of tiny robots that count pebbles on a beach with under "
                     "one percent error across ten beaches."},
    ]
    data.write_text(
        json.dumps(good[0]) + "\n"
        + '{"id": "broken", "title": \n'
        + json.dumps(good[1]) + "\n"
        + json.dumps({"id": "no-abstract", "title": "Missing the abstract"}) + "\n",
        encoding="utf-8",
    )
    store = tmp_path / "store"
    proc = run("ingest", "--quiet", str(data), storage=store)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert any(f"{data}:2:" in w for w in warnings), proc.stderr
    assert any(f"{data}:4:" in w and "abstract" in w for w in warnings), proc.stderr
    assert len(warnings) == 2
    assert "Read 2 papers" in proc.stdout
    indexed = {p.doc_id for p in Engine(Settings(storage=store)).index.all_papers()}
    assert indexed == {"good-1", "good-2"}


def test_ask_prints_answer_and_sources_without_importing_gradio(run, engine):
    code = (
        "import sys\n"
        "from rag_bot.surfaces.cli import main\n"
        "rc = main(['ask', 'how', 'does', 'capkv', 'work'])\n"
        "print('@@', rc, sorted(m for m in sys.modules if m.split('.')[0] == 'gradio'))\n"
    )
    proc = run("-c", code, exe=[sys.executable])
    assert proc.returncode == 0, proc.stderr
    answer, _, report = proc.stdout.rpartition("@@ ")
    assert report.strip() == "0 []", "`rag-bot ask` must not load the chat stack (gradio)"
    # the question was really answered, in the human format
    capkv = paper_with(engine, "CapKV")
    assert "[1]" in answer and "Sources:" in answer
    assert f"[1] {clean_markup(engine.retriever.papers[capkv].title)} ({capkv}," in answer
    # how sure it is, in words, and each source's probability
    direct = engine.ask("how does capkv work")
    assert words.certainty_line(direct.certainty) in answer
    assert words.probability_text(direct.citations[0].probability) in answer


def test_lone_surrogate_record_is_indexed_with_a_warning_not_a_crash(run, tmp_path):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    data = tmp_path / "odd.jsonl"
    data.write_text(
        json.dumps({"id": "good", "title": "Counting pebbles with tiny robots",
                    "abstract": "We present PebbleBot, a swarm of tiny robots that count pebbles on a beach."}) + "\n"
        + '{"id": "odd", "title": "Sieves \\ud800 for widgets", '
        + '"abstract": "We introduce WidgetSieve, a lattice sieve that frobnicates widgets in linear time."}\n',
        encoding="utf-8",
    )
    store = tmp_path / "store"
    proc = run("ingest", "--quiet", str(data), storage=store)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"{data}:2: invalid character" in warnings[0], proc.stderr
    assert "Read 2 papers" in proc.stdout
    indexed = {p.doc_id: p.title for p in Engine(Settings(storage=store)).index.all_papers()}
    assert indexed == {"good": "Counting pebbles with tiny robots", "odd": "Sieves \ufffd for widgets"}


@pytest.mark.parametrize(("name", "content"), [("empty.jsonl", ""), ("header-only.csv", "id,title,abstract\n")])
def test_prune_with_an_empty_file_keeps_the_index_and_says_why(run, run_in, seed_storage, tmp_path, name, content):
    store = _copy_store(seed_storage, tmp_path)  # `rag-bot ingest --quiet seeds` made the same store
    empty = tmp_path / name
    empty.write_text(content)
    proc = run("ingest", "--quiet", "--prune", str(empty), storage=store)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"warning: {empty}: no records" in proc.stderr
    assert "--prune was skipped" in proc.stderr
    assert "The index holds 38 papers" in proc.stdout
    assert run_in("stats", storage=store).stdout.startswith("38 papers, ")


@pytest.mark.parametrize("args", [["stats"], ["ask", "how", "does", "capkv", "work"]], ids=["stats", "ask"])
def test_closed_output_pipe_ends_quietly(seed_storage, tmp_path, args):
    """`rag-bot stats | head -1`: the reader goes away before rag-bot writes."""
    proc = subprocess.Popen([RAG_BOT, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(seed_storage), cwd=tmp_path)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=180) == 141
    assert stderr == ""


def test_question_with_invalid_utf8_exits_2_with_one_line(run):
    proc = run("ask", "what does caf\udcff do?")  # the bytes b"caf\xff" on the command line
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not valid UTF-8" in lines[0], proc.stderr


def test_batch_skips_a_line_with_invalid_utf8_and_answers_the_others(run, seed_storage, tmp_path):
    """The choice: a bad --batch line is reported with its number and skipped; the others are answered (exit 0)."""
    batch = tmp_path / "questions.txt"
    batch.write_bytes(b"how does capkv work\ncaf\xff centroids\nCompare CorrSteer and SARSteer\n")
    for proc in (run("ask", "--json", "--batch", str(batch)),
                 subprocess.run([RAG_BOT, "ask", "--json", "--batch", "-"], input=batch.read_bytes(),
                                capture_output=True, env=_env(seed_storage), timeout=180)):
        stdout = proc.stdout if isinstance(proc.stdout, str) else proc.stdout.decode()
        stderr = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode()
        assert proc.returncode == 0, stderr
        assert "Traceback" not in stderr
        assert [o["question"] for o in _objects(stdout)] == ["how does capkv work", "Compare CorrSteer and SARSteer"]
        assert "line 2" in stderr and "not valid UTF-8" in stderr and "skipped" in stderr


def test_unexpected_error_is_one_line_and_the_traceback_goes_to_debug_logging(run):
    code = (
        "import os, sys\n"
        "from rag_bot.surfaces import cli\n"
        "from rag_bot.engine import Engine\n"
        "def boom(self): raise RuntimeError('boom')\n"
        "Engine.stats = boom\n"
        "if sys.argv[1:]: os.environ['RAG_BOT_LOG_LEVEL'] = 'DEBUG'\n"
        "sys.exit(cli.main(['stats']))\n"
    )
    proc = run("-c", code, exe=[sys.executable])
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "rag-bot: unexpected error (RuntimeError); run with RAG_BOT_LOG_LEVEL=DEBUG for details"
    ]
    debug = run("-c", code, "debug", exe=[sys.executable])
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr and "RuntimeError: boom" in debug.stderr


def test_ask_cite_prints_the_cited_papers_in_each_format(run, run_in, engine):
    import bibtexparser
    import rispy

    question = "Compare CorrSteer and SARSteer"
    answer = json.loads(run_in("ask", "--json", question).stdout)
    cited = {c["doc_id"] for c in answer["citations"]}
    assert len(cited) == 2
    out = run("ask", "--cite", "bibtex", question).stdout
    bibtex = out.split("References (bibtex):\n", 1)[1]
    library = bibtexparser.parse_string(bibtex)
    assert not library.failed_blocks and len(library.entries) == 2
    assert {e["title"] for e in library.entries} == {engine.papers[d].title for d in cited}
    ris = json.loads(run_in("ask", "--json", "--cite", "ris", question).stdout)["references"]
    assert len(rispy.loads(ris)) == 2
    csl = json.loads(json.loads(run_in("ask", "--json", "--cite", "csl", question).stdout)["references"])
    assert {item["note"].split()[2].rstrip(";") for item in csl} == cited


@pytest.mark.parametrize("command", [["stats"], ["ask", "what is CorrSteer?"], ["serve"], ["api"], ["mcp"]])
@pytest.mark.parametrize(("setting", "named"), [
    ("RAG_BOT_TOP_K=abc", "RAG_BOT_TOP_K='abc' must be a whole number, at least 1"),
    ("RAG_BOT_TOP_K=0", "RAG_BOT_TOP_K='0' must be a whole number, at least 1"),
    ("RAG_BOT_CHUNK_OVERLAP=500", "RAG_BOT_CHUNK_OVERLAP=500 must be less than RAG_BOT_CHUNK_SIZE=160"),
    ("RAG_BOT_PORT=70000", "RAG_BOT_PORT='70000' must be a whole number from 1 to 65535"),
])
def test_a_bad_setting_stops_every_command_with_one_line_naming_it(seed_storage, tmp_path, command, setting, named):
    key, value = setting.split("=")
    env = {**_env(seed_storage), key: value}
    proc = subprocess.run([RAG_BOT, *command], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"rag-bot: bad setting: {named}") and line.endswith("(see docs/settings.md)"), line


def test_a_bad_url_setting_masks_its_credentials(seed_storage, tmp_path):
    env = {**_env(seed_storage), "RAG_BOT_CHROMA_URL": "http://admin:s3cret@chroma.example:99999"}
    proc = subprocess.run([RAG_BOT, "stats"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and "s3cret" not in proc.stderr + proc.stdout
    assert "RAG_BOT_CHROMA_URL='http://***@chroma.example:99999' must be an http:// or https:// URL" in proc.stderr


@pytest.mark.parametrize(("content", "skipped"), [
    (b"\n   \n\n", 3), (b"\xff\xfe\n\xc3(\n", 2), (b"", 0),
    ("\ufeff\n\u200b\n\x00\x00\n".encode(), 3),  # a byte-order mark, a zero-width space, NULs: invisible
])
def test_a_batch_without_a_readable_line_says_so_and_exits_2(run, run_in, tmp_path, content, skipped):
    batch = tmp_path / "questions.txt"
    batch.write_bytes(content)
    proc = (run if content == b"\n   \n\n" else run_in)("ask", "--batch", str(batch))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == (
        f"rag-bot: no question in {batch} ({skipped} lines skipped); put one question per line")
    assert "unexpected error" not in proc.stderr


@pytest.mark.parametrize("question", ["\u200b", "\ufeff", "\u200b \u2060", "\U000e0020", "\u180e\u034f", "\u2800"])
def test_a_question_of_invisible_characters_is_empty(run, run_in, question):
    proc = (run if question == "\u200b" else run_in)("ask", question)
    assert proc.returncode == 2 and proc.stdout == "" and "the question is empty" in proc.stderr


@pytest.mark.parametrize("port", ["70000", "0", "-1", "http"])
def test_api_port_out_of_range_is_refused(run, port):
    proc = run("api", f"--port={port}")
    assert proc.returncode == 2
    assert f"argument --port: {port if port != 'http' else repr(port)} is not a port number (1 to 65535)" \
        in proc.stderr
    assert "rag-bot API on" not in proc.stderr


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("flags", [["--rebuild"], ["--rebuild", "--prune"], []])
def test_a_mistyped_ingest_path_is_one_line_exit_2_and_the_store_is_untouched(run, run_in, seed_storage, tmp_path,
                                                                              flags):
    """`ingest --rebuild seedz/` used to move a healthy store aside before finding that seedz/ does not exist."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(seed_storage, store)
    before = _files(store)
    proc = run("ingest", *flags, "--quiet", str(SEEDS), "seedz/", storage=store)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "rag-bot: no such file or folder: seedz/; nothing was changed (check the path and run the same command again)"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"], "nothing set aside"
    assert _files(store) == before
    # A source inside the store folder would be moved aside with it: refused the same way.
    inside = store / "papers.jsonl"
    inside.write_text('{"id": "x", "title": "A title", "abstract": "An abstract of several words here."}\n')
    proc = run_in("ingest", "--rebuild", "--quiet", str(inside), storage=store)
    assert proc.returncode == 2 and "inside the store folder" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


@pytest.mark.parametrize("source", ["empty-folder", "garbage.jsonl.gz", "/dev/null"])
def test_a_rebuild_from_sources_that_give_no_paper_keeps_the_store(run, run_in, seed_storage, tmp_path, source):
    """`ingest --rebuild` with a path that exists but yields no paper used to set a healthy store aside for an
    empty one."""
    import shutil

    store = tmp_path / "store"
    shutil.copytree(seed_storage, store)
    before = _files(store)
    (tmp_path / "empty-folder").mkdir()
    (tmp_path / "garbage.jsonl.gz").write_bytes(b"\x1f\x8b not really gzip")
    path = source if source.startswith("/") else str(tmp_path / source)
    proc = (run if source == "empty-folder" else run_in)("ingest", "--rebuild", "--quiet", path, storage=store)
    assert proc.returncode == 2, proc.stderr
    assert "so the store was not rebuilt; nothing was changed" in proc.stderr.strip().splitlines()[-1]
    assert not [p for p in tmp_path.iterdir() if ".broken-" in p.name], "nothing set aside"
    assert _files(store) == before
    assert "CorrSteer" in run_in("ask", "What does CorrSteer do?", storage=store).stdout


# --- doctor notices what breaks every question, and one unreadable paper breaks none (issue 19) --------------------

def _copy_store(seed_storage: Path, tmp_path: Path) -> Path:
    import shutil

    store = tmp_path / "store"
    shutil.copytree(seed_storage, store)
    return store


def test_a_paper_whose_metadata_cannot_be_read_is_skipped_and_doctor_names_it(run, run_in, engine, seed_storage,
                                                                               tmp_path):
    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex

    store = _copy_store(seed_storage, tmp_path)
    kept = paper_with(engine, "CorrSteer")
    broken = next(p for p in sorted(engine.papers) if p != kept)
    index = PaperIndex(Settings(storage=store))
    index.papers.update(ids=[broken], metadatas=[{"authors": '["Ada Lovelace", '}])  # cut JSON text
    index.record_write()  # as an import leaves it: readers rebuild their caches from the records
    proc = run("ask", "--json", "What does CorrSteer gain on HarmBench?", storage=store)
    assert proc.returncode == 0, proc.stderr
    assert kept in [c["doc_id"] for c in _objects(proc.stdout)[0]["citations"]]
    assert f"paper {broken} skipped" in proc.stderr and "'authors'" in proc.stderr, proc.stderr
    doctor = run_in("doctor", storage=store)
    assert doctor.returncode == 1, doctor.stdout
    problem = next(line for line in doctor.stdout.splitlines() if "cannot be read" in line)
    assert broken in problem and "'authors'" in problem and "not valid JSON" in problem
    assert "fix:" in doctor.stdout and "import" in doctor.stdout and "--rebuild" in doctor.stdout


def test_doctor_finds_vectors_of_another_dimension(run, engine, tmp_path):
    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex

    store = tmp_path / "store"
    index = PaperIndex(Settings(storage=store))
    for source, target in ((engine.index.chunks, index.chunks), (engine.index.papers, index.papers)):
        got = source.get(include=["documents", "metadatas", "embeddings"])
        target.upsert(ids=got["ids"], documents=got["documents"], metadatas=got["metadatas"],
                      embeddings=[list(v[:256]) for v in got["embeddings"]])  # as another model embeds them
    doctor = run("doctor", storage=store)
    assert doctor.returncode == 1, doctor.stdout
    problems = [line for line in doctor.stdout.splitlines() if "256-dimensional" in line]
    assert len(problems) == 2 and all("384" in line for line in problems), doctor.stdout
    assert any(engine.index.papers.get(limit=1)["ids"][0] in line for line in problems), "names ids"
    assert "--rebuild" in doctor.stdout


def test_ingest_leaves_the_search_index_ready_for_the_first_question(run, tmp_path):
    """The lexical side (BM25, names, filter columns) is built by the ingest that changed the collection, not by
    the next question."""
    from rag_bot.retrieval.lexical import LexicalCache
    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex

    store = tmp_path / "store"
    data = tmp_path / "two.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{n}", "title": f"Pebble counting robots {n}", "abstract":
                                        f"We present PebbleBot {n}, a swarm of tiny robots that count pebbles on a "
                                        "beach with under one percent error."}) + "\n" for n in range(2)))
    proc = run("ingest", str(data), storage=store)
    assert proc.returncode == 0, proc.stderr
    lexicon = LexicalCache(PaperIndex(Settings(storage=store))).cached()
    assert lexicon is not None and sorted(lexicon.ids) == ["p0", "p1"]


def test_ingest_sentences_readies_every_stored_paper_once_and_refuses_paths(run, run_in, seed_storage, tmp_path):
    """`rag-bot ingest --sentences` embeds the sentences of the stored papers that lack them (an imported
    collection has none), and a second run embeds nothing."""
    import shutil
    import sqlite3

    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex
    from rag_bot.store.sentence_file import sentence_file

    store = _copy_store(seed_storage, tmp_path)
    index = PaperIndex(Settings(storage=store))
    path = sentence_file(index).path
    shutil.rmtree(path.parent, ignore_errors=True)  # the session's answers on the seed store may have filled some
    assert json.loads(run_in("stats", "--json", storage=store).stdout)["sentence_vectors"] == 0
    assert not path.parent.exists(), "stats made no file"
    first = run("ingest", "--sentences", "--quiet", storage=store)
    assert first.returncode == 0, first.stderr
    assert "Embedded the sentences of 38 papers (0 had them already)" in first.stdout
    with sqlite3.connect(path) as db:
        stored = {doc_id for (doc_id,) in db.execute("SELECT doc_id FROM vectors")}
    assert stored == {p.doc_id for p in index.all_papers()}
    again = run_in("ingest", "--sentences", "--quiet", storage=store)
    assert again.returncode == 0 and "Embedded the sentences of 0 papers (38 had them already)" in again.stdout
    assert json.loads(run_in("stats", "--json", storage=store).stdout)["sentence_vectors"] == 38
    assert "sentence vectors stored: 38 papers" in run_in("stats", storage=store).stdout
    refused = run_in("ingest", "--sentences", str(SEEDS), storage=store)
    assert refused.returncode == 2 and "give it no paths" in refused.stderr and "Traceback" not in refused.stderr
