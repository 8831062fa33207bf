"""Reference-manager and paper-site files (rag_bot/reading/formats/), written by the libraries the tools use: bibtexparser,
rispy, pandoc (CSL-JSON, as Zotero writes it), the standard library's XML writer (arXiv's Atom feed) and JSON for
the sites whose files are their API's JSON (arXiv's OAI snapshot, OpenReview, Semantic Scholar)."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import bibtexparser
import rispy
from bibtexparser.model import Entry, Field

from rag_bot.reading.corpus import read_file, read_paths

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
    assert first.authors == ["Ann Smith", "Bo Lee"] and first.url == "https://doi.org/10.1234/abc"
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


OTHER = ("Diffusion models generate images by reversing a noising process; we show that a learned schedule of "
         "noise levels cuts the number of sampling steps by half while keeping the sample quality of the baseline.")


def test_csl_json_as_pandoc_writes_it_becomes_papers(tmp_path):
    import pypandoc

    source = bib(tmp_path / "in.bib", [
        ("ann2024", {"title": "Sparse Routing for Long Documents", "author": "Smith, Ann and van Lee, Bo",
                     "journal": "TMLR", "year": "2024", "doi": "10.1234/ABC", "abstract": ABSTRACT}),
        ("none2023", {"title": "A Paper Without Its Abstract", "author": "Doe, Jo", "year": "2023"}),
    ])
    path = tmp_path / "library.json"
    path.write_text(pypandoc.convert_file(str(source), "csljson", format="bibtex"), encoding="utf-8")
    result = read_file(path)
    [paper] = result.papers
    # pandoc writes titles in sentence case, as CSL stores them (a citation style title-cases them)
    assert paper.doc_id == "10.1234/abc" and paper.title == "Sparse routing for long documents"
    assert paper.authors == ["Ann Smith", "Bo van Lee"] and paper.venue == "TMLR" and paper.year == 2024
    assert paper.identifiers == {"doi": "10.1234/abc"} and paper.text == ABSTRACT
    [problem] = result.problems
    assert "A paper without its abstract" in problem.message and "abstract" in problem.message


def _oai(arxiv: str, title: str, abstract: str) -> dict:
    return {"id": arxiv, "submitter": "Ann Smith", "authors": "Ann Smith, Bo Lee and Cy Park", "title": title,
            "comments": "12 pages", "journal-ref": None, "doi": None, "report-no": None, "categories": "cs.LG stat.ML",
            "license": None, "abstract": f"  {abstract}\n", "update_date": "2025-02-03",
            "versions": [{"version": "v1", "created": "Mon, 4 Nov 2024 10:00:00 GMT"}],
            "authors_parsed": [["Smith", "Ann", ""], ["Lee", "Bo", ""], ["Park", "Cy", ""]]}


def test_arxiv_snapshot_lines_named_json_are_streamed_as_records(tmp_path):
    path = tmp_path / "arxiv-metadata-oai-snapshot.json"  # Kaggle's name: JSON lines, not one document
    lines = [_oai("2411.01234", "Sparse Routing for\n  Long Documents", ABSTRACT),
             _oai("2411.05678", "Noise Schedules That Halve Sampling", OTHER), _oai("2411.09999", "No Abstract", "")]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    result = read_file(path)
    first, second = result.papers
    assert (first.doc_id, first.title, first.year) == ("2411.01234", "Sparse Routing for Long Documents", 2024)
    assert first.authors == ["Ann Smith", "Bo Lee", "Cy Park"] and first.url == "https://arxiv.org/abs/2411.01234"
    assert first.identifiers == {"arxiv": "2411.01234"} and second.doc_id == "2411.05678"
    [problem] = result.problems
    assert problem.line == 3 and "abstract" in problem.message


ATOM = "http://www.w3.org/2005/Atom"
ARXIV = "http://arxiv.org/schemas/atom"


def _atom(path: Path, entries: list[dict]) -> Path:
    ElementTree.register_namespace("", ATOM)
    ElementTree.register_namespace("arxiv", ARXIV)
    feed = ElementTree.Element(f"{{{ATOM}}}feed")
    ElementTree.SubElement(feed, f"{{{ATOM}}}title").text = "arXiv Query: search_query=all:routing"
    for e in entries:
        entry = ElementTree.SubElement(feed, f"{{{ATOM}}}entry")
        ElementTree.SubElement(entry, f"{{{ATOM}}}id").text = f"http://arxiv.org/abs/{e['id']}"
        ElementTree.SubElement(entry, f"{{{ATOM}}}published").text = e["published"]
        ElementTree.SubElement(entry, f"{{{ATOM}}}title").text = e["title"]
        ElementTree.SubElement(entry, f"{{{ATOM}}}summary").text = e["summary"]
        for name in e["authors"]:
            ElementTree.SubElement(ElementTree.SubElement(entry, f"{{{ATOM}}}author"), f"{{{ATOM}}}name").text = name
        if e.get("doi"):
            ElementTree.SubElement(entry, f"{{{ARXIV}}}doi").text = e["doi"]
        ElementTree.SubElement(entry, f"{{{ATOM}}}link", href=f"http://arxiv.org/abs/{e['id']}", rel="alternate")
    ElementTree.ElementTree(feed).write(path, encoding="utf-8", xml_declaration=True)
    return path


def test_an_arxiv_api_feed_becomes_papers_whatever_its_name(tmp_path):
    path = _atom(tmp_path / "query", [  # saved from the browser without an extension
        {"id": "2411.01234v2", "published": "2024-11-04T10:00:00Z", "title": "Sparse Routing for Long Documents",
         "summary": ABSTRACT, "authors": ["Ann Smith", "Bo Lee"], "doi": "10.1234/abc"},
        {"id": "2411.07777v1", "published": "2024-11-09T10:00:00Z", "title": "Withdrawn", "summary": " ",
         "authors": ["Jo Doe"]},
    ])
    result = read_paths([path])
    [paper] = result.papers
    assert (paper.doc_id, paper.year, paper.authors) == ("2411.01234", 2024, ["Ann Smith", "Bo Lee"])
    assert paper.identifiers == {"arxiv": "2411.01234", "doi": "10.1234/abc"}
    [problem] = result.problems
    assert "Withdrawn" in problem.message and "abstract" in problem.message


def test_openreview_notes_of_both_api_versions_become_papers(tmp_path):
    v2 = {"id": "aBcD123", "forum": "aBcD123", "invitations": ["ICML.cc/2025/Conference/-/Submission"],
          "cdate": 1735689600000, "pdate": 1746057600000,
          "content": {"title": {"value": "Sparse Routing for Long Documents"}, "abstract": {"value": ABSTRACT},
                      "authors": {"value": ["Ann Smith", "Bo Lee"]}, "venue": {"value": "ICML 2025 poster"}}}
    v1 = {"id": "XyZ987", "forum": "XyZ987", "invitation": "ICLR.cc/2020/Conference/-/Blind_Submission",
          "tcdate": 1569000000000,
          "content": {"title": "Noise Schedules That Halve Sampling", "abstract": OTHER, "authors": ["Jo Doe"]}}
    notes = tmp_path / "notes.json"
    notes.write_text(json.dumps({"notes": [v2], "count": 1}), encoding="utf-8")
    lines = tmp_path / "notes.jsonl"
    lines.write_text(json.dumps(v1) + "\n", encoding="utf-8")
    first, second = read_paths([notes, lines]).papers
    assert (first.doc_id, first.venue, first.year) == ("aBcD123", "ICML 2025 poster", 2025)
    assert first.identifiers == {"openreview": "aBcD123"} and first.url == "https://openreview.net/forum?id=aBcD123"
    assert (second.doc_id, second.year, second.authors) == ("XyZ987", 2019, ["Jo Doe"])


def test_semantic_scholar_answers_become_papers_with_html_cleaned(tmp_path):
    paper = {"paperId": "649def34f8be52c8b66281af98ae884c09aef38b", "title": "Sparse Routing &amp; Long Documents",
             "abstract": f"<p>{ABSTRACT}</p>", "venue": "TMLR", "year": 2024, "url": None,
             "externalIds": {"DOI": "10.1234/ABC", "ArXiv": "2411.01234", "CorpusId": 1234},
             "authors": [{"authorId": "1", "name": "Ann Smith"}, {"authorId": "2", "name": "Bo Lee"}]}
    search = tmp_path / "search.json"
    search.write_text(json.dumps({"total": 1, "offset": 0, "data": [paper]}), encoding="utf-8")
    batch = tmp_path / "batch.json"  # POST /paper/batch: a list, null where an id was not found
    batch.write_text(json.dumps([None, {**paper, "paperId": "ffff", "abstract": None}]), encoding="utf-8")
    result = read_paths([search, batch])
    [got] = result.papers
    assert got.title == "Sparse Routing & Long Documents" and got.text == ABSTRACT and got.year == 2024
    assert got.identifiers == {"doi": "10.1234/abc", "arxiv": "2411.01234", "s2": paper["paperId"]}
    [problem] = result.problems
    assert problem.path == str(batch) and "item 2" in problem.message and "abstract" in problem.message


def test_a_file_is_read_by_what_it_holds_not_by_its_name(tmp_path):
    library = bib(tmp_path / "x.bib", [("smith2024", {"title": "Sparse Routing", "abstract": ABSTRACT})])
    as_text = tmp_path / "zotero-export.txt"
    as_text.write_text(library.read_text(), encoding="utf-8")
    ris = tmp_path / "refs.txt"
    ris.write_text(rispy.dumps([{"type_of_reference": "JOUR", "title": "Noise", "abstract": OTHER}]),
                   encoding="utf-8")
    [a], [b] = read_file(as_text).papers, read_file(ris).papers
    assert a.doc_id == "smith2024" and b.title == "Noise"


def test_bibtex_escapes_are_undone_and_broken_files_are_one_line_each(tmp_path):
    path = bib(tmp_path / "esc.bib", [("k", {"title": "Routing {\\&} Caching at 50{\\%}",
                                             "abstract": ABSTRACT.replace("one percent", "1\\%")})])
    [paper] = read_file(path).papers
    assert paper.title == "Routing & Caching at 50%" and "within 1% of dense" in paper.text
    for name, text in (("bad.xml", "<feed><entry>"), ("bad.json", '[{"title": '), ("bad.ris", "TY  - JOUR\nTI  - x")):
        (tmp_path / name).write_text(text, encoding="utf-8")
        result = read_file(tmp_path / name)
        assert not result.papers and len(result.problems) == 1, (name, result.problems)
