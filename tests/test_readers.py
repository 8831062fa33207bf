"""Reference-manager files (rag_bot/readers.py), written by the libraries the tools use (bibtexparser, rispy)."""

from __future__ import annotations

from pathlib import Path

import bibtexparser
import rispy
from bibtexparser.model import Entry, Field

from rag_bot.corpus import read_file, read_paths

ABSTRACT = ("We study sparse attention for long documents and show that a learned routing of tokens halves the "
            "memory of the key-value cache while keeping perplexity within one percent of dense attention.")


def bib(path: Path, entries: list[tuple[str, dict[str, str]]]) -> Path:
    library = bibtexparser.Library()
    for key, fields in entries:
        library.add(Entry("article", key, [Field(k, v) for k, v in fields.items()]))
    path.write_text(bibtexparser.write_string(library), encoding="utf-8")
    return path


def test_a_bibtex_export_becomes_papers_and_an_entry_without_abstract_is_named(tmp_path):
    path = bib(tmp_path / "library.bib", [
        ("smith2024", {"title": "{Sparse} Routing for Long Documents", "author": "Smith, Ann and Lee, Bo",
                       "journal": "TMLR", "year": "2024", "doi": "10.1234/abc", "abstract": ABSTRACT}),
        ("noabs2023", {"title": "A Paper Without Its Abstract", "author": "Doe, Jo", "year": "2023"}),
        ("key2022", {"title": "Keyed Only", "author": "Roe, Al", "year": "2022", "abstract": ABSTRACT + " Again."}),
    ])
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["10.1234/abc", "key2022"]
    first = result.papers[0]
    assert first.title == "Sparse Routing for Long Documents" and first.venue == "TMLR" and first.year == 2024
    assert first.authors == ["Smith, Ann", "Lee, Bo"] and first.url == "https://doi.org/10.1234/abc"
    assert len(result.problems) == 1 and "'noabs2023'" in str(result.problems[0])
    assert "missing field 'abstract'" in str(result.problems[0]) and str(result.problems[0]).startswith(str(path))


def test_a_ris_export_becomes_papers_and_a_record_without_abstract_is_named(tmp_path):
    path = tmp_path / "library.ris"
    path.write_text(rispy.dumps([
        {"type_of_reference": "JOUR", "title": "Sparse Routing for Long Documents", "authors": ["Smith, Ann"],
         "journal_name": "TMLR", "year": "2024", "doi": "10.1234/abc", "abstract": ABSTRACT,
         "urls": ["https://example.org/paper"]},
        {"type_of_reference": "JOUR", "title": "A Paper Without Its Abstract", "authors": ["Doe, Jo"], "year": "2023"},
    ]), encoding="utf-8")
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["10.1234/abc"]
    paper = result.papers[0]
    assert paper.venue == "TMLR" and paper.year == 2024 and paper.url == "https://example.org/paper"
    assert len(result.problems) == 1 and "record 2 (A Paper Without Its Abstract)" in str(result.problems[0])


def test_a_folder_of_exports_is_read_with_the_other_formats(tmp_path):
    bib(tmp_path / "a.bib", [("k1", {"title": "One", "author": "A, B", "abstract": ABSTRACT})])
    (tmp_path / "b.ris").write_text(rispy.dumps([{"type_of_reference": "JOUR", "title": "Two", "id": "r2",
                                                  "abstract": ABSTRACT + " Two."}]), encoding="utf-8")
    (tmp_path / "broken.bib").write_text("@article{oops, title = {Unclosed", encoding="utf-8")
    result = read_paths([tmp_path])
    assert sorted(p.doc_id for p in result.papers) == ["k1", "r2"]
    assert not any("Traceback" in str(p) for p in result.problems)
