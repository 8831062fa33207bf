"""Hostile input to the readers and to what the CLI prints (issue 35, the low cases): each gets one clear line or a
per-record report, never a hang, a traceback or the loss of the good files given with it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_bot.reading.corpus import read_paths
from rag_bot.types import Paper, Problem
from tests.openai_stub import Reply

RAG_BOT = str(Path(sys.executable).parent / "rag-bot")
ABSTRACT = "We propose WidgetNet, a network that frobnicates widgets in linear time on three benchmarks."
TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # ESC, BEL, CSI ... (tab and newline are text)


def _cli(tmp_path: Path, storage: Path, *args: str, timeout: float = 180,
         **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), GRADIO_ANALYTICS_ENABLED="False", **env_vars)
    return subprocess.run([RAG_BOT, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)


def _stored(storage: Path) -> dict[str, Paper]:
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    return {p.doc_id: p for p in Engine(Settings(storage=storage)).index.all_papers()}


# --- a FIFO ------------------------------------------------------------------------------------------------------

def test_a_fifo_given_to_ingest_is_refused_at_once(tmp_path):
    """`rag-bot ingest FIFO` opened the FIFO to check it could be read, and waited for a writer forever."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    proc = _cli(tmp_path, tmp_path / "store", "ingest", "--quiet", str(fifo), timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"warning: {fifo}: not a regular file; skipped" in proc.stderr.splitlines()
    assert proc.stdout.startswith("Read 0 papers from 0 files")


# --- RIS without ER ------------------------------------------------------------------------------------------------

def test_a_ris_record_without_er_keeps_the_next_record_and_says_so(tmp_path):
    ris = tmp_path / "refs.ris"
    ris.write_text(
        f"TY  - JOUR\nTI  - Widget networks\nAB  - {ABSTRACT}\n\n"  # no ER: rispy read the next TY into this one
        f"TY  - JOUR\nTI  - Pebble robots\nAB  - We present PebbleBot, a swarm of robots that count pebbles.\nER  - \n\n"
        f"TY  - JOUR\nTI  - Lattice sieves\nAB  - We study lattice sieves that count things faster than before.\n",
        encoding="utf-8",
    )
    got = read_paths([ris])
    assert [p.title for p in got.papers] == ["Widget networks", "Pebble robots", "Lattice sieves"]
    assert [(p.line, p.message) for p in got.problems] == [
        (1, "record 1: no 'ER  - ' line before the next record (line 5); read as ending there"),
    ]  # the last record lacks its ER too: the file's end ends it, and nothing is lost


# --- a .txt that starts with "[" -------------------------------------------------------------------------------------

@pytest.mark.parametrize("start", ["[Background]", "[1]", "{Motivation}"])
def test_a_headerless_text_file_starting_with_a_bracket_is_read_as_text(tmp_path, start):
    """Such a file was taken for JSON by its first character, reported as bad JSON, and its abstracts lost."""
    seed = tmp_path / "notes.txt"
    seed.write_text(f"{start} {ABSTRACT}\n\n[2] We present PebbleBot, a swarm of tiny robots that count pebbles "
                    "on a beach with small error.\n", encoding="utf-8")
    got = read_paths([seed])
    assert [p.doc_id for p in got.papers] == ["notes#1", "notes#2"]
    assert got.papers[0].text.startswith(start)
    assert not any("JSON" in p.message for p in got.problems), got.problems
    # A .txt that does hold a JSON document is still read as one.
    seed.write_text(json.dumps([{"type": "article", "id": "w1", "title": "Widgets", "abstract": ABSTRACT}]))
    assert [p.doc_id for p in read_paths([seed]).papers] == ["w1"]


# --- odd shapes and deep nesting ---------------------------------------------------------------------------------

leaf = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
        | st.sampled_from([ABSTRACT, "10.1000/xyz", "2101.00001", 1e30, -1e20, 10**30, "2024-05-01"]))
shape = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=3), max_leaves=10)


def _fields(names: list[str]) -> st.SearchStrategy[dict]:
    return st.dictionaries(st.sampled_from(names), shape, max_size=len(names))


CSL = _fields(["id", "title", "abstract", "author", "issued", "DOI", "URL", "container-title", "note"]).map(
    lambda d: {"type": "article", "title": "T", **d})
S2 = _fields(["title", "abstract", "authors", "externalIds", "venue", "publicationVenue", "year", "publicationDate",
              "url"]).map(lambda d: {"paperId": "p1", **d})
OPENREVIEW = st.tuples(_fields(["title", "abstract", "authors", "venue"]), _fields(["id", "forum", "cdate", "pdate"]))
OPENREVIEW_NOTES = OPENREVIEW.map(lambda t: {"invitation": "x", **t[1], "content": {"title": "T", **t[0]}})
ARXIV = _fields(["id", "title", "abstract", "authors", "authors_parsed", "versions", "journal-ref", "doi"]).map(
    lambda d: {"categories": "cs.LG", "update_date": "2024-01-01", **d})
RECORDS = st.lists(CSL | S2 | OPENREVIEW_NOTES | ARXIV | shape, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=RECORDS, wrap=st.sampled_from(["list", "data", "notes", "one", "lines"]))
def test_odd_shapes_in_known_formats_give_problems_never_an_exception(records, wrap):
    """CSL-JSON, Semantic Scholar, OpenReview and arXiv records whose fields hold lists, objects, numbers or null where
    text is expected raised TypeError or AttributeError, which ended the whole ingest."""
    doc: object = {"list": records, "data": {"data": records}, "notes": {"notes": records},
                   "one": records[0] if records else {}}.get(wrap)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / ("batch.jsonl" if wrap == "lines" else "batch.json")
        text = "\n".join(json.dumps(r) for r in records) if wrap == "lines" else json.dumps(doc)
        path.write_text(text + "\n", encoding="utf-8")
        got = read_paths([path])
    assert all(isinstance(p, Paper) for p in got.papers) and all(isinstance(p, Problem) for p in got.problems)
    for paper in got.papers:
        assert isinstance(paper.year, int | None) and all(isinstance(a, str) for a in paper.authors)


def _good(folder: Path) -> Path:
    good = folder / "good.jsonl"
    good.write_text(json.dumps({"id": "good-1", "title": "Widget networks", "abstract": ABSTRACT}) + "\n")
    return good


def test_a_deeply_nested_document_is_one_problem_and_the_other_files_are_read(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # RecursionError in json.loads
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps({"data": [{"paperId": "p", "title": "T", "abstract": ABSTRACT,
                                            "venue": json.loads("[" * 600 + "]" * 600)}]}))  # parses, too deep to walk
    lines = tmp_path / "lines.jsonl"
    lines.write_text(json.dumps({"id": "ok", "title": "Fine", "abstract": ABSTRACT}) + "\n"
                     + json.dumps({"id": "x", "title": "Deep", "abstract": json.loads("[" * 600 + "]" * 600)}) + "\n")
    got = read_paths([deep, nested, lines, _good(tmp_path)])
    assert sorted(p.doc_id for p in got.papers) == ["good-1", "ok"]
    assert [(p.path, p.line, p.message) for p in got.problems] == [
        (str(deep), None, "JSON nested deeper than 32 levels; skipped"),
        (str(nested), None, "JSON nested deeper than 32 levels; skipped"),
        (str(lines), 2, "JSON nested deeper than 32 levels; skipped"),
    ]


@pytest.mark.parametrize("stamp", [1e30, -1e20, 10**30])
def test_an_extreme_openreview_date_drops_the_year_not_the_file(tmp_path, stamp):
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"notes": [
        {"id": "f1", "forum": "f1", "invitation": "x", "cdate": stamp,
         "content": {"title": {"value": "Widget networks"}, "abstract": {"value": ABSTRACT}}},
        {"id": "f2", "forum": "f2", "invitation": "x", "cdate": 1_700_000_000_000,
         "content": {"title": {"value": "Pebble robots"}, "abstract": {"value": ABSTRACT}}},
    ]}))
    got = read_paths([notes])
    assert [(p.doc_id, p.year) for p in got.papers] == [("f1", None), ("f2", 2023)]
    assert len(got.problems) == 1
    assert got.problems[0].message.startswith("item 1 (Widget networks): year 'date ")
    assert got.problems[0].message.endswith("is not a year (1665-2100); paper kept without a year")


def test_ingest_of_odd_files_beside_a_good_one_keeps_the_good_papers(tmp_path):
    """The whole ingest ended with "unexpected error (TypeError)" and wrote nothing."""
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"data": [{"paperId": "s1", "title": "Bad ids", "abstract": ABSTRACT,
                                         "externalIds": ["DOI"], "authors": 7, "publicationVenue": "V"},
                                        {"paperId": "s2", "title": "Pebble robots", "abstract": ABSTRACT}]}))
    csl = tmp_path / "csl.json"
    csl.write_text(json.dumps([{"type": "article", "id": "c1", "title": "Numbers as authors", "abstract": ABSTRACT,
                                "author": 12}]))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 50_000 + "]" * 50_000)
    store = tmp_path / "store"
    proc = _cli(tmp_path, store, "ingest", "--quiet", str(odd), str(csl), str(deep), str(_good(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "unexpected error" not in proc.stderr and "Traceback" not in proc.stderr
    assert f"warning: {deep}: JSON nested deeper than 32 levels; skipped" in proc.stderr.splitlines()
    assert sorted(_stored(store)) == ["c1", "good-1", "s1", "s2"]


# --- terminal escapes in what the CLI prints and in exports --------------------------------------------------------

HOSTILE = "\x1b]0;pwned\x07\x1b[31mCorrSteer\x1b[0m selects features\x1b[2J by correlation\x9b1m\x00 [1]."


@pytest.mark.parametrize("flags", [[], ["--stream"]])
def test_terminal_escapes_in_an_llm_answer_never_reach_the_terminal(stub, seed_storage, tmp_path, flags):
    stub.reset()
    stub.default = lambda body: Reply(text=HOSTILE)
    proc = _cli(tmp_path, seed_storage, "ask", *flags, "What does CorrSteer do?", OPENAI_BASE_URL=stub.url,
                OPENAI_API_KEY="sk-test", RAG_BOT_LLM_RETRIES="0")
    assert proc.returncode == 0, proc.stderr
    assert stub.requests, "the model wrote the answer"
    assert proc.stdout.startswith("CorrSteer selects features by correlation [1].\n"), proc.stdout
    assert not TERMINAL_CONTROL.search(proc.stdout + proc.stderr)


@pytest.mark.parametrize("fmt", ["bibtex", "ris", "csl"])
def test_exports_hold_no_escape_or_control_character(fmt):
    from rag_bot.writing.references import export

    paper = Paper(doc_id="w\x1b[31m1", title="Widget\x1b]0;pwned\x07 networks", text=ABSTRACT + "\x1b[2J\x00",
                  source="evil\x1b[31m.jsonl", authors=["Jane\x9b1m Doe"], venue="ICML\nER  - \x1b[0m",
                  identifiers={"doi": "10.1000/x\x07yz"}, url="https://example.org/w")
    written = export([paper], fmt)
    assert not TERMINAL_CONTROL.search(written)
    assert "Widget networks" in written and "pwned" not in written
    if fmt == "ris":
        assert written.count("ER  - ") == 1, "a venue cannot end the record"


# --- same-named text files in two runs ---------------------------------------------------------------------------

def _seed(path: Path, *abstracts: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("ICML 2026 Papers\n\n" + "\n\n".join(abstracts) + "\n", encoding="utf-8")
    return path


def test_ingest_says_which_stored_papers_a_same_named_file_replaces(tmp_path):
    first = _seed(tmp_path / "a" / "papers.txt", ABSTRACT,
                  "We present PebbleBot, a swarm of tiny robots that count pebbles on beaches with small error.")
    second = _seed(tmp_path / "b" / "papers.txt",
                   "We study lattice sieves for counting things and show they beat prior sieves on three tasks.",
                   "We introduce QuuxLM, a language model trained on quux data that answers quux questions well.")
    store = tmp_path / "store"
    for path in (first, first):  # the same file again replaces nothing
        proc = _cli(tmp_path, store, "ingest", "--quiet", str(path))
        assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    proc = _cli(tmp_path, store, "ingest", "--quiet", str(second))
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {second}: replaces 2 stored papers from an earlier file also named papers.txt (papers#1, "
        "papers#2): a text file's papers are named by its file name; to keep both, rename one file or ingest both "
        "in one command"
    ]
    assert _stored(store)["papers#1"].text.startswith("We study lattice sieves")
