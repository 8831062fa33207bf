"""Citable references (rag_bot/writing/references.py): BibTeX, RIS and CSL-JSON that real parsers read back."""

from __future__ import annotations

import json

import bibtexparser
import pytest
import rispy

from rag_bot.types import Answer, Citation, Paper
from rag_bot.writing.references import citation_keys, cited_papers, export, to_csl

PAPERS = [
    Paper(doc_id="icml#1", title="CorrSteer: steering with {correlated} features & 100% more_fun", text="We propose "
          "CorrSteer, which selects $\\times$ features.", source="icml.txt", authors=["Jane Doe", "Li, Wei"],
          venue="ICML", year=2026, url="https://example.org/corrsteer"),
    Paper(doc_id="icml#2", title="CorrSteer: a second paper", text="Another abstract.", source="icml.txt",
          authors=["John Doe"], venue="ICML", year=2026),
    Paper(doc_id="x#3", title="The Élan of tokenizers", text="No authors, no venue.", source="x.jsonl"),
]


def test_keys_are_unique_readable_and_stable():
    keys = citation_keys(PAPERS)
    assert len(set(keys.values())) == 3
    assert keys["icml#1"].startswith("doe2026corrsteer") and keys["x#3"] == "elan"
    assert citation_keys(PAPERS) == keys, "the same papers always get the same keys"
    assert citation_keys(PAPERS[2:]) == {"x#3": "elan"}


def test_bibtex_round_trips_through_a_real_parser():
    library = bibtexparser.parse_string(export(PAPERS, "bibtex"))
    assert not library.failed_blocks
    entries = {e.key: e for e in library.entries}
    assert len(entries) == 3
    first = entries[citation_keys(PAPERS)["icml#1"]]
    assert first.entry_type == "inproceedings"
    assert first["author"] == "Jane Doe and Li, Wei" and first["year"] == "2026" and first["booktitle"] == "ICML"
    assert first["url"] == "https://example.org/corrsteer" and r"icml\#1" in first["note"]
    assert r"\&" in first["title"] and r"100\%" in first["title"], "special characters are escaped"
    assert entries["elan"].entry_type == "misc"


def test_ris_round_trips_through_a_real_parser():
    records = rispy.loads(export(PAPERS, "ris"))
    assert [r["type_of_reference"] for r in records] == ["CONF", "CONF", "GEN"]
    assert records[0]["authors"] == ["Doe, Jane", "Li, Wei"]
    assert records[0]["year"] == "2026" and records[0]["urls"] == ["https://example.org/corrsteer"]
    assert "CorrSteer" in records[0]["title"] and "×" in records[0]["abstract"]


def test_csl_json_has_the_fields_citeproc_reads():
    items = json.loads(export(PAPERS, "csl"))
    assert items == to_csl(PAPERS)
    assert items[0]["author"] == [{"family": "Doe", "given": "Jane"}, {"family": "Li", "given": "Wei"}]
    assert items[0]["issued"] == {"date-parts": [[2026]]} and items[0]["type"] == "paper-conference"
    assert "author" not in items[2] and items[2]["type"] == "article"


def test_a_conversations_cited_papers_come_once_in_order_of_first_citation():
    def answer(*ids: str) -> Answer:
        citations = [Citation(n=i + 1, doc_id=d, title=d, source="s", quote="q") for i, d in enumerate(ids)]
        return Answer(question="q", mode="ask", answer="a", grounded=True, citations=citations, retrieved=[])

    papers = {p.doc_id: p for p in PAPERS}
    cited = cited_papers([answer("x#3", "icml#1"), answer("icml#1", "icml#2", "gone#9")], papers)
    assert [p.doc_id for p in cited] == ["x#3", "icml#1", "icml#2"]


def test_a_javascript_url_is_never_exported_as_a_link():
    """A reference manager makes `url` a link: only http(s) URLs are written, in every format."""
    hostile = Paper(doc_id="h#1", title="Hostile", text="An abstract.", source="h.jsonl", url="javascript:alert(4)")
    good = Paper(doc_id="g#1", title="Good", text="An abstract.", source="g.jsonl", url="https://e.org/g")
    for fmt in ("bibtex", "ris", "csl"):
        text = export([hostile, good], fmt)
        assert "javascript:" not in text and "https://e.org/g" in text, fmt


def test_exported_fields_hold_nothing_active():
    """A Markdown preview or a reference manager may render a title, an author or an abstract."""
    from markdown_it import MarkdownIt

    paper = Paper(doc_id="h#1", title="Glow ![t](http://127.0.0.1:9/t.png) <img src=x onerror=alert(1)>",
                  text="We [click](javascript:alert(1)) and <a href='javascript:alert(2)'>here</a> [r]: javascript:x",
                  source="h.jsonl", authors=["Eve <script>alert(5)</script>"])
    for fmt in ("bibtex", "ris", "csl"):
        page = MarkdownIt("commonmark", {"html": True}).render(export([paper], fmt))
        assert "<img" not in page and "<script" not in page and 'href="javascript' not in page, (fmt, page)
        assert "Glow" in page and "Eve" in page and "click" in page, fmt


def _run(storage, *args: str):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env["RAG_BOT_STORAGE"] = str(storage)
    exe = str(Path(sys.executable).with_name("rag-bot"))
    return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=300, cwd=storage.parent)


def _fields(paper: Paper) -> tuple:
    from rag_bot.text import clean_markup

    return (clean_markup(paper.title), clean_markup(paper.text), paper.authors, paper.venue, paper.year, paper.url,
            paper.identifiers)


@pytest.mark.slow
def test_an_export_reads_back_into_the_same_papers_in_each_format(tmp_path):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from tests.conftest import SEEDS
    from tests.reading.test_identity import _files

    files = _files(tmp_path / "in")
    source = tmp_path / "source"
    ingest = _run(source, "ingest", "--quiet", str(SEEDS), *map(str, files.values()))
    assert ingest.returncode == 0, ingest.stderr
    original = dict(Engine(Settings(storage=source)).papers)
    assert len(original) == 40 and original["10.1234/abc"].identifiers["openreview"] == "aBcD123"
    for fmt, name in (("bibtex", "all.bib"), ("ris", "all.ris"), ("csl", "all.json")):
        out = tmp_path / name
        done = _run(source, "export", str(out))  # the format follows the extension
        assert done.returncode == 0 and f"Wrote 40 papers to {out} ({fmt})" in done.stdout, done.stderr
        copy = tmp_path / f"copy-{fmt}"
        back = _run(copy, "ingest", "--quiet", str(out))
        assert back.returncode == 0 and "problem" not in back.stdout.lower(), back.stdout + back.stderr
        papers = Engine(Settings(storage=copy)).papers
        assert set(papers) == set(original), fmt
        for doc_id, paper in original.items():
            assert _fields(papers[doc_id]) == _fields(paper), (fmt, doc_id)


@pytest.mark.slow
def test_an_export_of_a_filter_holds_only_its_papers(seed_storage, tmp_path):
    out = tmp_path / "icml.ris"
    done = _run(seed_storage, "export", "--format", "ris", "--year", "2026", "--venue", "icml", str(out))
    assert done.returncode == 0, done.stderr
    assert len(rispy.loads(out.read_text())) == 38
    none = _run(seed_storage, "export", "--author", "Nobody Anywhere", str(tmp_path / "none.bib"))
    assert none.returncode == 1 and "no paper passes" in none.stderr and not (tmp_path / "none.bib").exists()
    portable = _run(seed_storage, "export", "--year", "2026", str(tmp_path / "x.ragbot.jsonl.gz"))
    assert portable.returncode == 2 and "whole store" in portable.stderr and "Traceback" not in portable.stderr
