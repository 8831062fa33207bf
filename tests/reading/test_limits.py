"""One record too big cannot break the store (issue 35): every field has a limit (rag_bot/reading/limits.py), a
record over one is reported `file:line: reason` and skipped by an ingest and a chat upload, refused by an import
(nothing imported), a gzipped line of 300 MB is skipped as it streams; after each the store still answers."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_bot.engine import Engine
from rag_bot.reading import limits
from rag_bot.settings import Settings
from rag_bot.store.index import PaperIndex
from rag_bot.store.portable import export_collection
from rag_bot.store.records import paper_metadata, spread
from rag_bot.surfaces.cli import main
from rag_bot.types import Paper
from tests.conftest import ROOT
from tests.store.test_index import chroma_server  # noqa: F401 - a real `chroma run` server on loopback

GOOD = {"id": "good", "title": "SparseLens", "venue": "ICML", "year": 2025, "authors": ["Ada Lovelace"],
        "abstract": "We propose SparseLens, a method that finds sparse features in large language models and steers "
                    "them to reduce harmful outputs on HarmBench."}
OTHER = {"id": "other", "title": "TideNet", "abstract": "We present TideNet, a forecasting model for coastal tides "
                                                        "trained on a century of gauge records."}
QUESTION = "Which method finds sparse features in large language models?"
# Chroma's folder store refuses a record of about 5,460 metadata keys or more (issue 35, measured): a record at
# every limit must stay well under it.
CHROMA_KEYS = 5_460
EMOJI = "\U0001f600"  # 4 bytes in UTF-8, 12 characters as a JSON escape: the costliest character there is


def _jsonl(path: Path, *records: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _engine(storage: Path, embedder, **values: object) -> Engine:
    settings_ = Settings(storage=storage, **values)  # type: ignore[arg-type]
    return Engine(settings_, index=PaperIndex(settings_, embedder))


def _still_answers(storage: Path, embedder, papers: int, capsys) -> None:
    """`rag-bot stats` works and a question is answered from the good paper."""
    capsys.readouterr()
    assert main(["--storage", str(storage), "stats"]) == 0
    assert capsys.readouterr().out.startswith(f"{papers} papers, ")
    answer = _engine(storage, embedder).ask(QUESTION)
    assert answer.citations and answer.citations[0].doc_id == "good"


# --- ingest and chat upload: a record over a limit is skipped, the rest is stored ---------------------------------

HUGE = {
    # Issue 35's venue of 5.5 MB: its line is over the line limit, skipped whole as it streams.
    "venue": ({"venue": "x" * 5_500_000}, f"line over {limits.LINE_CHARS:,} characters; skipped"),
    "venue of 1 MB": ({"venue": "x" * 1_000_000}, "the venue is 1,000,000 characters long (the limit is 800); skipped"),
    "authors": ({"authors": [f"Author {n}" for n in range(200_000)]},
                "it has 200,000 authors (the limit is 300); skipped"),
    "abstract": ({"abstract": "Sparse features of large models. " * 30_000},  # 1 MB (a longer line is skipped whole)
                 "the abstract is 989,999 characters long (the limit is 100,000); skipped"),
}


@pytest.mark.parametrize("field", sorted(HUGE))
def test_an_ingest_skips_a_record_over_a_limit_and_the_store_still_answers(field, tmp_path, embedder, capsys):
    """Issue 35's critical case: a 5.5 MB venue (or 200,000 authors) made `ingest` fail and every later `stats`,
    `ask` and `doctor` fail with it, for good; a 5 MB abstract is no abstract."""
    over, reason = HUGE[field]
    path = _jsonl(tmp_path / "papers.jsonl", {**OTHER, "id": "bad", **over}, GOOD)
    storage = tmp_path / "store"
    assert main(["--storage", str(storage), "ingest", str(path)]) == 0
    assert f"{path}:1: {reason}" in capsys.readouterr().err
    _still_answers(storage, embedder, 1, capsys)


@pytest.mark.parametrize("field", ["venue", "venue of 1 MB", "authors"])
def test_a_chat_upload_skips_a_record_over_a_limit_and_the_store_still_answers(field, tmp_path, embedder, capsys):
    """The chat's upload is an ingest that keeps stored papers (`Engine.ingest(replace=False)`, as
    rag_bot/surfaces/ui/collection.py runs it): every later question from any user got 503."""
    storage = tmp_path / "store"
    engine = _engine(storage, embedder)
    engine.ingest([_jsonl(tmp_path / "seed.jsonl", GOOD)])
    over, reason = HUGE[field]
    path = _jsonl(tmp_path / "upload.jsonl", {**OTHER, **over})
    report, result = engine.ingest([path], replace=False)
    assert [str(p) for p in result.problems] == [f"{path}:1: {reason}"]
    assert report.added == 0
    _still_answers(storage, embedder, 1, capsys)


def test_a_record_at_every_limit_is_stored_and_read_back(tmp_path, embedder):
    """The limits are not only refusals: a record with every field at its limit, written in the costliest
    characters, is stored whole in a real Chroma and read back as it was given (the abstract cut as set)."""
    record = {"id": "e" * limits.ID_CHARS, "title": "Limits " + "t" * (limits.TITLE_CHARS - 7),
              "abstract": ("Sparse features of large models steer outputs. " * 3000)[:limits.ABSTRACT_CHARS],
              "venue": EMOJI * limits.VENUE_CHARS, "url": "https://x.org/" + EMOJI * (limits.URL_CHARS - 14),
              "authors": [EMOJI * limits.AUTHOR_CHARS] * limits.AUTHORS}
    engine = _engine(tmp_path / "store", embedder, max_abstract_chars=2000)
    report, result = engine.ingest([_jsonl(tmp_path / "edge.jsonl", record)])
    assert report.added == 1, result.problems
    (paper,) = engine.index.all_papers()
    assert (paper.venue, paper.authors, paper.url) == (record["venue"], record["authors"], record["url"])
    assert len(paper.title) <= limits.TITLE_CUT and len(paper.text) <= 2000


# --- the limits together keep a record well under Chroma's key limit ------------------------------------------------

def _worst_paper() -> Paper:
    """A paper with every field at its limit, in 4-byte characters (12 as a JSON escape)."""
    return Paper(doc_id=EMOJI * limits.ID_CHARS, title=EMOJI * limits.TITLE_CHARS, text=EMOJI * limits.ABSTRACT_CHARS,
                 source=EMOJI * limits.ID_CHARS, aliases=[EMOJI * limits.ALIAS_CHARS] * limits.ALIASES,
                 links=[EMOJI * limits.URL_CHARS] * limits.LINKS, venue=EMOJI * limits.VENUE_CHARS, year=2025,
                 authors=[EMOJI * limits.AUTHOR_CHARS] * limits.AUTHORS, url=EMOJI * limits.URL_CHARS,
                 identifiers={kind: EMOJI * limits.IDENTIFIER_CHARS for kind in ("doi", "arxiv", "openreview", "s2")})


def test_a_record_at_every_limit_is_well_under_chroma_s_key_limit():
    """`records.spread` cuts every string into 900-byte pieces, one key each: the worst record (every field at its
    limit, every character the costliest, every other metadata key an import allows at its limit) has 1,871 keys,
    a third of the 5,460 Chroma refuses; and as a JSONL or an export line it fits the line limit."""
    paper = _worst_paper()
    meta = paper_metadata(paper, "f" * limits.VALUE_CHARS) | {"chunks": 1}
    extra = {f"k{n:0{limits.KEY_CHARS - 1}d}": EMOJI * limits.VALUE_CHARS for n in range(limits.METADATA_KEYS - len(meta))}
    keys = len(spread(meta | extra))
    assert keys <= CHROMA_KEYS // 2, keys
    jsonl = json.dumps({"id": paper.doc_id, "title": paper.title, "abstract": paper.text, "venue": paper.venue,
                        "url": paper.url, "authors": paper.authors, "identifiers": paper.identifiers})
    exported = json.dumps({"kind": "paper", "id": paper.doc_id, "document": paper.text, "embedding": [-0.1234567] * 3072,
                           "metadata": {k: v for k, v in (meta | extra).items() if k != "text"}})
    assert max(len(jsonl), len(exported)) < limits.LINE_CHARS


# --- a gzipped line of 300 MB: skipped as it streams ----------------------------------------------------------------

def test_a_300_mb_gzipped_line_is_skipped_as_it_streams_in_little_memory(tmp_path, embedder, capsys):
    """Issue 35: a 458 KB `.jsonl.gz` holding one 300 MB line took 6.1 GB and 168 s (here: 5,024 MiB, 94 s, before;
    43 MiB, 5 s after). The line is reported and skipped without being held; the next record is read."""
    path = tmp_path / "huge.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b'{"id": "huge", "title": "One huge line", "abstract": "')
        block = b"sparse features of large models " * 32768  # 1 MiB
        for _ in range(300):
            out.write(block)
        out.write(b'"}\n' + json.dumps(GOOD).encode() + b"\n")
    assert path.stat().st_size < 2 * 2**20
    # The peak is the child's VmHWM (its own memory since exec; `ru_maxrss` would count this forked process's), under
    # a 2 GiB cap: the old reader, taking GBs, fails fast instead of swapping the machine.
    code = ("import json, re, resource, sys; from pathlib import Path; "
            "resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30)); "
            "from rag_bot.reading.corpus import read_paths; r = read_paths([Path(sys.argv[1])]); "
            "peak = int(re.search(r'VmHWM:\\s+(\\d+)', Path('/proc/self/status').read_text()).group(1)) // 1024; "
            "print(json.dumps([[p.doc_id for p in r.papers], [str(p) for p in r.problems], peak]))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    ids, problems, peak_mib = json.loads(done.stdout)
    assert ids == ["good"]
    assert problems == [f"{path}:1: line over {limits.LINE_CHARS:,} characters; skipped"]
    assert peak_mib < 300, f"reading took {peak_mib} MiB"
    storage = tmp_path / "store"
    _engine(storage, embedder).ingest([path])
    _still_answers(storage, embedder, 1, capsys)


# --- import: a record over a limit, or a chunk taking over another paper's, refuses the file ----------------------

@pytest.fixture(scope="module")
def exported(tmp_path_factory, embedder) -> Path:
    """The export of a store of two papers (GOOD and OTHER)."""
    folder = tmp_path_factory.mktemp("limits-export")
    engine = _engine(folder / "store", embedder)
    engine.ingest([_jsonl(folder / "two.jsonl", GOOD, OTHER)])
    path = folder / "two.ragbot.jsonl.gz"
    export_collection(engine.index, path)
    return path


def _records(path: Path) -> tuple[dict, list[dict]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.loads(handle.readline()), [json.loads(line) for line in handle]


def _save(path: Path, manifest: dict, records: list[dict]) -> tuple[Path, int]:
    """The file (with a manifest counting its records) and the line of the paper 'good'."""
    manifest = dict(manifest, papers=sum(r["kind"] == "paper" for r in records),
                    chunks=sum(r["kind"] == "chunk" for r in records))
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for obj in [manifest, *records]:
            out.write(json.dumps(obj) + "\n")
    line = 2 + next(n for n, r in enumerate(records) if (r["kind"], r["id"]) == ("paper", "good"))
    return path, line


def _imported(storage: Path, exported: Path, capsys) -> None:
    assert main(["--storage", str(storage), "import", str(exported)]) == 0
    capsys.readouterr()


def _good(records: list[dict]) -> dict:
    return next(r for r in records if (r["kind"], r["id"]) == ("paper", "good"))


def test_an_import_with_6000_extra_metadata_keys_is_refused_whole(exported, tmp_path, embedder, capsys):
    """A 35 KB file holding one paper with 6,000 extra metadata keys failed part-way and could not be put back."""
    storage = tmp_path / "store"
    _imported(storage, exported, capsys)
    manifest, records = _records(exported)
    _good(records)["metadata"].update({f"extra{n}": "x" for n in range(6000)})
    path, line = _save(tmp_path / "keys.ragbot.jsonl.gz", manifest, records)
    assert main(["--storage", str(storage), "import", str(path)]) == 2
    keys = len(_good(records)["metadata"])
    assert (f"{path}:{line}: paper 'good': its metadata has {keys:,} keys (the limit is "
            f"{limits.METADATA_KEYS}); nothing was imported") in capsys.readouterr().err
    _still_answers(storage, embedder, 2, capsys)


@pytest.mark.parametrize("copies", [160_000, 30_000])
def test_an_import_with_a_huge_abstract_is_refused_whole(copies, exported, tmp_path, embedder, capsys):
    """A 5 MB abstract (its line over the line limit: refused as it streams) or a 1 MB one (over the abstract's
    limit) failed part-way and could not be put back."""
    storage = tmp_path / "store"
    _imported(storage, exported, capsys)
    manifest, records = _records(exported)
    _good(records)["document"] = text = "Sparse features of large models. " * copies
    path, line = _save(tmp_path / "abstract.ragbot.jsonl.gz", manifest, records)
    assert main(["--storage", str(storage), "import", str(path)]) == 2
    reason = (f"line over {limits.LINE_CHARS:,} characters (no record within the limits is that long)"
              if len(text) > limits.LINE_CHARS else
              f"paper 'good': the abstract is {len(text):,} characters long (the limit is 100,000)")
    assert f"{path}:{line}: {reason}; nothing was imported" in capsys.readouterr().err
    _still_answers(storage, embedder, 2, capsys)


def test_an_import_cannot_take_over_another_paper_s_chunks(exported, tmp_path, embedder, capsys):
    """A chunk whose id names the stored paper 'other' (`other::0`) but whose metadata says it is 'good's would
    replace 'other's chunk with 'good's vector: the file is refused, 'other' keeps its chunk."""
    storage = tmp_path / "store"
    _imported(storage, exported, capsys)
    manifest, records = _records(exported)
    taken = next(r for r in records if r["kind"] == "chunk" and r["metadata"]["doc_id"] == "good")
    records = [r for r in records if r["metadata"].get("doc_id") != "other" and r["id"] != "other"]
    records.insert(0, {**taken, "id": "other::0"})
    _good(records)["metadata"]["chunks"] += 1
    path, _ = _save(tmp_path / "takeover.ragbot.jsonl.gz", manifest, records)
    assert main(["--storage", str(storage), "import", str(path)]) == 2
    assert (f"{path}:2: chunk 'other::0': its id names the paper 'other' but its metadata says it belongs to "
            "'good'") in capsys.readouterr().err
    index = PaperIndex(Settings(storage=storage), embedder)
    assert index.chunks.get(ids=["other::0"])["metadatas"][0]["doc_id"] == "other"
    assert index.health().healthy
    _still_answers(storage, embedder, 2, capsys)


def test_doctor_names_chunks_taken_over_by_another_paper(exported, tmp_path, embedder, capsys):
    """What an older rag-bot's import let in (a chunk 'other::0' whose metadata says it is 'good's): `doctor` said
    healthy; it names the chunk now."""
    storage = tmp_path / "store"
    _imported(storage, exported, capsys)
    index = PaperIndex(Settings(storage=storage), embedder)
    got = index.chunks.get(where={"doc_id": "good"}, include=["embeddings"], limit=1)
    index.chunks.upsert(ids=["other::0"], embeddings=[list(got["embeddings"][0])],
                        metadatas=[{"doc_id": "good", "chunk": 1}])
    assert main(["--storage", str(storage), "doctor"]) == 1
    assert ("problem: 1 chunks have an id naming another paper than the one they belong to (other::0): that "
            "paper lost them") in capsys.readouterr().out


# --- any record, of any size, through the whole write path of a real Chroma -----------------------------------------

CHARS = ["a", "é", "中", EMOJI]
# field -> its limit; the sizes tried: small, just under, at, just over, far over
LIMITS = {"id": limits.ID_CHARS, "title": limits.TITLE_CHARS, "abstract": limits.ABSTRACT_CHARS,
          "venue": limits.VENUE_CHARS, "url": limits.URL_CHARS, "author": limits.AUTHOR_CHARS,
          "authors": limits.AUTHORS}


def _sizes(over: bool) -> st.SearchStrategy[dict]:
    """Field sizes: small, just under and at each limit, and (`over`) just over it, far over it, or anything."""
    def size(limit: int, least: int) -> st.SearchStrategy[int]:
        near = st.sampled_from([least, limit - 1, limit]) | st.integers(least, limit)
        return near | st.sampled_from([limit + 1, 3 * limit]) | st.integers(least, 2 * limit) if over else near

    return st.fixed_dictionaries({
        "id": size(limits.ID_CHARS, 16), "title": size(limits.TITLE_CHARS, 1),
        "abstract": size(limits.ABSTRACT_CHARS, 40), "venue": size(limits.VENUE_CHARS, 1),
        "url": size(limits.URL_CHARS, 10), "author": size(limits.AUTHOR_CHARS, 1),
        "authors": size(limits.AUTHORS, 0), "char": st.sampled_from(CHARS),
    })


# Each example: a record within every limit (else nearly none would be), and up to two of any size.
records_of_every_size = st.tuples(_sizes(over=False), st.lists(_sizes(over=True), max_size=2)).map(
    lambda drawn: [drawn[0], *drawn[1]])


def _record(sizes: dict) -> tuple[dict, bool]:
    """A JSONL record of those field sizes, and whether it is within every limit."""
    ch = sizes["char"]
    letter = ch if ch.isalpha() else "a"  # an abstract's words hold a letter
    record = {
        "id": (uuid.uuid4().hex + ch * sizes["id"])[:sizes["id"]],
        "title": ch * sizes["title"],
        "abstract": ((letter * 7 + " ") * (sizes["abstract"] // 8 + 1))[:sizes["abstract"] - 1] + letter,
        "venue": ch * sizes["venue"],
        "url": ("https://x.org/" + ch * sizes["url"])[:sizes["url"]],
        "authors": [ch * sizes["author"]] * sizes["authors"],
    }
    names = [field for field in LIMITS if field != "author" or sizes["authors"]]  # no author: no name's length
    within = all(sizes[field] <= LIMITS[field] for field in names)
    return record, within


def _drive(engine: Engine, folder: Path, many: list[dict]) -> None:
    """Ingest the records; exactly those within the limits are stored, and the store still answers."""
    made = [_record(sizes) for sizes in many]
    before = engine.index.count()
    path = _jsonl(folder / f"{uuid.uuid4().hex}.jsonl", *(record for record, _ in made))
    report, result = engine.ingest([path])
    kept = {record["id"] for record, within in made if within}
    assert report.added == len(kept), [str(p) for p in result.problems]
    assert engine.index.count() == before + len(kept)
    assert engine.stats()["papers"] == before + len(kept)
    assert all("; skipped" in str(p) or "cut to" in str(p) for p in result.problems)


PROPERTY = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large])


@pytest.mark.slow
@PROPERTY
@given(many=records_of_every_size)
def test_records_of_every_size_keep_a_folder_store_answering(many, tmp_path, embedder):
    storage = tmp_path / "property-store"
    engine = _engine(storage, embedder, max_abstract_chars=1000)  # a short cut: the embedding is not under test
    if engine.index.count() == 0:
        engine.ingest([_jsonl(tmp_path / "good.jsonl", GOOD)])
    _drive(engine, tmp_path, many)
    assert engine.ask(QUESTION).citations[0].doc_id == "good"


@pytest.mark.slow
@settings(PROPERTY, max_examples=4)
@given(many=records_of_every_size)
def test_records_of_every_size_keep_a_chroma_server_answering(many, tmp_path, embedder, chroma_server):  # noqa: F811
    url, _ = chroma_server
    settings_ = Settings(chroma_url=url, storage=tmp_path / "unused", max_abstract_chars=1000)
    engine = Engine(settings_, index=PaperIndex(settings_, embedder))
    if engine.index.count() == 0:
        engine.ingest([_jsonl(tmp_path / "good.jsonl", GOOD)])
    _drive(engine, tmp_path, many)
    assert engine.ask(QUESTION).citations[0].doc_id == "good"
