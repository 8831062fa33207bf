"""Reading corpus files: seed .txt files, JSONL and JSONL.GZ records, and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rag_bot.reading.corpus import read_file, read_paths
from tests.conftest import SEEDS

FILE_A = "000_9ecb01dab6d44e76"
FILE_B = "004_a162c505479229e7"


@pytest.fixture(scope="module")
def seed_papers():
    result = read_paths([SEEDS])
    assert result.problems == []
    return {p.doc_id: p for p in result.papers}


def _by_text(papers: dict, needle: str):
    found = [p for p in papers.values() if needle in p.text]
    assert found, needle
    return found[0]


def test_seed_folder_reads_38_abstracts_with_stable_ids(seed_papers) -> None:
    result = read_paths([SEEDS])
    assert result.files == 2
    assert len(seed_papers) == 38
    for stem in (FILE_A, FILE_B):
        ids = [d for d in seed_papers if d.startswith(stem + "#")]
        assert sorted(ids, key=lambda d: int(d.split("#")[1])) == [f"{stem}#{n}" for n in range(1, 20)]
        assert {seed_papers[d].source for d in ids} == {f"{stem}.txt"}


def test_seed_ids_follow_the_order_of_the_file(seed_papers) -> None:
    fedrot = seed_papers[f"{FILE_A}#13"]
    assert "rotational misalignment" in fedrot.text
    assert "FedRot-LoRA" in fedrot.title
    assert seed_papers[f"{FILE_A}#1"].text.startswith("Personalized federated LoRA fine tuning")
    assert seed_papers[f"{FILE_B}#19"].title.startswith("CyberPal 2.0")


def test_seed_abstracts_are_whole_paragraphs(seed_papers) -> None:
    lines = [line.strip() for line in (SEEDS / f"{FILE_A}.txt").read_text().splitlines()]
    paragraphs = [line for line in lines[1:] if line]
    assert [seed_papers[f"{FILE_A}#{n}"].text for n in range(1, 20)] == paragraphs


def test_derived_titles_name_the_introduced_method(seed_papers) -> None:
    assert "CorrSteer" in _by_text(seed_papers, "CorrSteer").title
    quatro = _by_text(seed_papers, "QUATRO")
    assert quatro.title.startswith("QUATRO")
    assert "Query-Adaptive Trust-Region" in quatro.title
    sar = _by_text(seed_papers, "SARSteer")
    assert sar.title.startswith("SARSteer")
    assert "*" not in sar.title  # markdown bold of **S**afe-**A**blated is cleaned
    assert "QUATRO" in quatro.aliases
    assert "Quartet II" in _by_text(seed_papers, "Quartet II").aliases


def test_titles_are_short_and_clean(seed_papers) -> None:
    for paper in seed_papers.values():
        assert 2 <= len(paper.title) <= 110, paper.doc_id
        for debris in ("\\", "$", "**"):
            assert debris not in paper.title, paper.doc_id


def test_links_are_extracted_without_trailing_punctuation(seed_papers) -> None:
    fedrot = seed_papers[f"{FILE_A}#13"]
    assert fedrot.links == ["https://github.com/haoran-zh/FedRot-LoRA"]
    assert "https://github.com/linweiii/SARSteer" in _by_text(seed_papers, "SARSteer").links
    with_links = [p for p in seed_papers.values() if "https://" in p.text]
    assert len(with_links) >= 8
    for paper in with_links:
        assert paper.links, paper.doc_id
        for link in paper.links:
            assert link in paper.text and not link.endswith((".", ",", ")"))
    assert all(not p.links for p in seed_papers.values() if "http" not in p.text)


def _abstract(n: int) -> str:
    return f"We propose Method{n}Net, a technique that improves retrieval quality across many benchmarks by {n} points."


def test_jsonl_records_become_papers_with_their_metadata(tmp_path: Path) -> None:
    records = [
        {"id": "rec-1", "title": "  Method One:   a study ", "abstract": _abstract(1), "venue": "ICML", "year": 2024,
         "authors": ["Ada Lovelace", " Alan Turing "], "url": "https://example.org/rec-1"},
        {"id": "rec-2", "title": "Method Two", "abstract": _abstract(2), "year": "2023"},
        {"id": "rec-3", "title": "Method Three", "abstract": _abstract(3) + " Code: https://github.com/x/m3."},
    ]
    path = tmp_path / "papers.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n")
    result = read_paths([path])
    assert result.problems == []
    assert result.files == 1
    one, two, three = result.papers
    assert [p.doc_id for p in result.papers] == ["rec-1", "rec-2", "rec-3"]
    assert one.title == "Method One: a study"  # the given title, whitespace tidied
    assert one.text == _abstract(1)
    assert (one.source, one.venue, one.year, one.url) == ("papers.jsonl", "ICML", 2024, "https://example.org/rec-1")
    assert one.authors == ["Ada Lovelace", "Alan Turing"]
    assert one.links[0] == "https://example.org/rec-1"
    assert (two.year, two.venue, two.url, two.authors) == (2023, None, None, [])
    assert three.links == ["https://github.com/x/m3"]


def test_gzipped_jsonl_reads_like_jsonl(tmp_path: Path) -> None:
    records = [{"id": f"gz-{n}", "title": f"Title {n}", "abstract": _abstract(n)} for n in range(3)]
    plain = tmp_path / "a.jsonl"
    plain.write_text("\n".join(json.dumps(r) for r in records))
    packed = tmp_path / "b.JSONL.GZ"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    got_plain, got_gz = read_file(plain), read_file(packed)
    assert got_gz.problems == []
    assert [p.doc_id for p in got_gz.papers] == ["gz-0", "gz-1", "gz-2"]
    assert [(p.title, p.text) for p in got_gz.papers] == [(p.title, p.text) for p in got_plain.papers]
    assert {p.source for p in got_gz.papers} == {"b.JSONL.GZ"}


def test_bad_jsonl_lines_are_reported_with_line_and_good_ones_kept(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "ok-1", "title": "Good", "abstract": _abstract(1)}),
        '{"id": "broken", "title": "x", ',
        json.dumps({"id": "no-title", "abstract": _abstract(3)}),
        json.dumps({"id": "empty", "title": "Empty", "abstract": "   "}),
        json.dumps({"id": "ok-1", "title": "Again", "abstract": _abstract(5)}),
        json.dumps(["not", "an", "object"]),
        json.dumps({"id": "ok-2", "title": "Good too", "abstract": _abstract(7)}),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = read_paths([path])
    assert [p.doc_id for p in result.papers] == ["ok-1", "ok-2"]
    assert result.papers[0].title == "Good"  # the first of a duplicated id wins
    problems = {p.line: str(p) for p in result.problems}
    assert sorted(problems) == [2, 3, 4, 5, 6]
    assert all(p.path == str(path) for p in result.problems)
    assert problems[2].startswith(f"{path}:2: ") and "JSON" in problems[2]
    assert "title" in problems[3] and "missing" in problems[3]
    assert "empty abstract" in problems[4]
    assert "duplicate" in problems[5] and "ok-1" in problems[5]
    assert "object" in problems[6]


def test_unreadable_files_are_reported_and_the_rest_still_read(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "g", "title": "Good", "abstract": _abstract(1)}))
    binary = tmp_path / "image.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    unknown = tmp_path / "papers.yaml"
    unknown.write_text("papers: []")
    not_gzip = tmp_path / "fake.jsonl.gz"
    not_gzip.write_text("plain text, not gzip")
    missing = tmp_path / "nowhere.jsonl"
    result = read_paths([binary, unknown, good, not_gzip, missing])
    assert [p.doc_id for p in result.papers] == ["g"]
    by_path = {p.path: p.message for p in result.problems}
    assert set(by_path) == {str(binary), str(unknown), str(not_gzip), str(missing)}
    assert "binary" in by_path[str(binary)]
    assert "unknown file type" in by_path[str(unknown)] and ".jsonl" in by_path[str(unknown)]
    assert "gzip" in by_path[str(not_gzip)]
    assert "no such file" in by_path[str(missing)]


def test_duplicate_ids_across_files_keep_the_first(tmp_path: Path) -> None:
    for name, title in (("a.jsonl", "First"), ("b.jsonl", "Second")):
        (tmp_path / name).write_text(json.dumps({"id": "same", "title": title, "abstract": _abstract(1)}))
    result = read_paths([tmp_path])
    assert [(p.doc_id, p.title) for p in result.papers] == [("same", "First")]
    assert len(result.problems) == 1 and "duplicate id 'same'" in str(result.problems[0])


def test_seed_file_without_header_reads_the_same_abstracts(tmp_path: Path) -> None:
    original = (SEEDS / f"{FILE_B}.txt").read_text()
    lines = original.splitlines()
    assert lines[0] == "ICML 2026 Papers"
    headless = tmp_path / f"{FILE_B}.txt"
    headless.write_text("\n".join(lines[1:]).lstrip("\n") + "\n")
    with_header = read_file(SEEDS / f"{FILE_B}.txt")
    without = read_file(headless)
    assert len(without.papers) == 19
    assert [(p.doc_id, p.title, p.text) for p in without.papers] == [
        (p.doc_id, p.title, p.text) for p in with_header.papers
    ]
    # The missing header is reported (file and line), but nothing is lost.
    assert [(p.path, p.line) for p in without.problems] == [(str(headless), 1)]
    assert "header" in without.problems[0].message


def test_seed_file_reports_too_short_abstracts_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "tiny.txt"
    path.write_text(f"ICML 2026 Papers\n\n{_abstract(1)}\n\nToo short.\n\n{_abstract(2)}\n")
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["tiny#1", "tiny#3"]
    assert [(p.path, p.line) for p in result.problems] == [(str(path), 5)]


def test_folder_without_corpus_files_is_reported(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("nothing here")
    result = read_paths([tmp_path])
    assert result.papers == []
    assert [p.path for p in result.problems] == [str(tmp_path)]


def test_csv_records_become_papers_and_bad_rows_are_reported_with_their_line(tmp_path: Path) -> None:
    path = tmp_path / "papers.csv"
    path.write_text(
        "id,title,abstract,venue,year,authors,url\n"
        'c1,Alpha Net,"An abstract about alpha networks that spans\ntwo lines of the file.",ICML,2025,'
        "Ann A; Bob B,https://x.org/1\n"
        "c2,,no title here,,,,\n"
        "c1,Again,a duplicate id,,,,\n"
        "c3,Gamma,Gamma networks learn from the abstract itself,,soon,,\n"
        "c4,Extra,abstract,a,1,b,c,one too many\n"
    )
    result = read_file(path)
    by_id = {p.doc_id: p for p in result.papers}
    assert list(by_id) == ["c1", "c3"]
    one = by_id["c1"]
    assert (one.title, one.source, one.venue, one.year, one.url) == ("Alpha Net", "papers.csv", "ICML", 2025, "https://x.org/1")
    assert one.authors == ["Ann A", "Bob B"] and one.text.endswith("two lines of the file.")
    assert by_id["c3"].year is None
    assert [str(p) for p in result.problems] == [
        f"{path}:4: missing field 'title'",
        f"{path}:5: duplicate id 'c1'",
        f"{path}:6: year 'soon' is not a year (1665-2100); paper kept without a year",
        f"{path}:7: more fields than the header",
    ]


def test_csv_without_the_required_columns_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("title,abstract\nx,y\n")
    result = read_file(path)
    assert result.papers == []
    assert "header lacks column 'id'" in str(result.problems[0]) and result.problems[0].line == 1


def test_lone_surrogate_in_jsonl_is_a_line_problem_and_the_file_is_still_indexed(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text(
        json.dumps({"id": "ok-1", "title": "Good", "abstract": _abstract(1)}) + "\n"
        + '{"id": "odd", "title": "Odd \\ud800 title", "abstract": "' + _abstract(2) + '"}\n'
        + json.dumps({"id": "ok-3", "title": "Good too", "abstract": _abstract(3)}) + "\n"
    )
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["ok-1", "odd", "ok-3"]
    assert result.papers[1].title == "Odd \ufffd title"
    assert all(p.content_hash for p in result.papers)
    assert [(p.path, p.line) for p in result.problems] == [(str(path), 2)]
    assert "invalid character" in result.problems[0].message


def test_bad_byte_in_seed_file_is_reported_by_line_and_the_other_abstracts_kept(tmp_path: Path) -> None:
    path = tmp_path / "bytes.txt"
    path.write_bytes(
        f"ICML 2026 Papers\n\n{_abstract(1)}\n\n".encode() + b"We propose Caf\xff Net, " + _abstract(2).encode()
        + f"\n\n{_abstract(3)}\n".encode()
    )
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["bytes#1", "bytes#2", "bytes#3"]
    assert "Caf\ufffd Net" in result.papers[1].text
    assert [str(p) for p in result.problems] == [f"{path}:5: not UTF-8 text (invalid bytes shown as \ufffd)"]


@pytest.mark.parametrize(("name", "content"), [("empty.jsonl", ""), ("blank.jsonl", "\n  \n"),
                                               ("header.csv", "id,title,abstract\n")])
def test_a_file_without_records_is_a_problem(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = read_file(path)
    assert result.papers == []
    assert [str(p) for p in result.problems] == [f"{path}: no records"]


def test_wrong_jsonl_types_are_reported_with_their_line(tmp_path: Path) -> None:
    records = [
        {"id": "ok-1", "title": "Good", "abstract": _abstract(1), "year": 2024, "authors": "Ada Lovelace"},
        {"id": "list-title", "title": ["a", "b"], "abstract": _abstract(2)},
        {"id": "bool-abstract", "title": "T", "abstract": True},
        {"id": 7, "title": "Numeric id", "abstract": _abstract(4)},
        {"id": "bad-authors", "title": "T", "abstract": _abstract(5), "authors": [1, 2]},
        {"id": "obj-venue", "title": "T", "abstract": _abstract(6), "venue": {"name": "ICML"}},
        {"id": "ok-7", "title": "Good too", "abstract": _abstract(7), "year": True, "authors": ["A", "B"]},
    ]
    path = tmp_path / "types.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["ok-1", "ok-7"]
    assert (result.papers[0].year, result.papers[0].authors) == (2024, ["Ada Lovelace"])
    assert (result.papers[1].year, result.papers[1].authors) == (None, ["A", "B"])
    assert [str(p) for p in result.problems] == [
        f"{path}:2: field 'title' must be a string, not an array",
        f"{path}:3: field 'abstract' must be a string, not a boolean",
        f"{path}:4: field 'id' must be a string, not a number",
        f"{path}:5: field 'authors' must be a string or a list of strings",
        f"{path}:6: field 'venue' must be a string, not an object",
        f"{path}:7: year True is not a year (1665-2100); paper kept without a year",
    ]


def _plain(n: int) -> str:
    return _abstract(n).replace(",", "")


def test_csv_unterminated_quote_is_reported_and_the_rows_after_it_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text(
        "id,title,abstract\n"
        f'q1,One,"{_plain(1)}"\n'
        f'q2,Two,"{_plain(2)}\n'  # the quote is never closed
        f"q3,Three,{_plain(3)}\n"
        f'q4,Four,"{_plain(4)}\nwhich spans two lines."\n'
        f"q5,Five,{_plain(5)}\n"
    )
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["q1", "q3", "q4", "q5"]
    assert all("q3," not in p.text for p in result.papers)
    assert result.papers[2].text.endswith("which spans two lines.")
    assert [str(p) for p in result.problems] == [
        f"{path}:3: unterminated quote (a quoted field is never closed); row skipped"
    ]


def test_csv_quote_closed_mid_field_is_reported_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text(
        "id,title,abstract\n"
        f'q1,"One" and more,{_plain(1)}\n'
        f'q2,Two,"{_plain(2)}\n'
        f'q3,"Three",{_plain(3)}\n'
    )
    result = read_file(path)
    assert [p.doc_id for p in result.papers] == ["q3"]
    assert [(p.line, p.message.split(" (")[0]) for p in result.problems] == [(2, "bad CSV"), (3, "unterminated quote")]


def _seed_text(*abstracts: str) -> str:
    return "ICML 2026 Papers\n\n" + "\n\n".join(abstracts) + "\n"


def test_only_regular_files_are_read(tmp_path: Path) -> None:
    import os

    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "good.txt").write_text(_seed_text(_abstract(1)))
    os.mkfifo(folder / "pipe.jsonl")  # reading it would wait forever for a writer
    (folder / "zeros.txt").symlink_to("/dev/zero")  # reading it would fill the memory
    (folder / "dangling.csv").symlink_to(tmp_path / "gone.csv")
    result = read_paths([folder])
    assert [p.doc_id for p in result.papers] == ["good#1"]
    assert sorted(str(p) for p in result.problems) == [
        f"{folder / 'dangling.csv'}: cannot read (No such file or directory)",
        f"{folder / 'pipe.jsonl'}: not a regular file; skipped",
        f"{folder / 'zeros.txt'}: not a regular file; skipped",
    ]
    given = read_paths([folder / "pipe.jsonl", folder / "zeros.txt"])
    assert given.papers == []
    assert [p.message for p in given.problems] == ["not a regular file; skipped"] * 2


def test_files_over_the_size_limit_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text(_seed_text(_abstract(1)) + "x" * 2**21)
    packed = tmp_path / "bomb.jsonl.gz"
    packed.write_bytes(gzip.compress(b" " * (2**20 + 1)))
    result = read_paths([big, packed], max_file_bytes=2**20)
    assert result.papers == []
    assert [str(p) for p in result.problems] == [
        f"{big}: file is 2 MB, over the 1 MB limit; skipped",
        f"{packed}: unpacks to over 1 MB; skipped",
    ]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig", "utf-32"])
def test_files_with_a_byte_order_mark_are_decoded(tmp_path: Path, encoding: str) -> None:
    text = _seed_text("We propose Café-Net, a naïve method that improves retrieval quality by 3 points.", _abstract(2))
    bom = {"utf-16-le": "\ufeff", "utf-16-be": "\ufeff"}.get(encoding, "")
    seed = tmp_path / "wide.txt"
    seed.write_bytes((bom + text).encode(encoding))
    record = {"id": "w1", "title": "Wide", "abstract": _abstract(1)}
    jsonl = tmp_path / "wide.jsonl"
    jsonl.write_bytes((bom + json.dumps(record, ensure_ascii=False) + "\n").encode(encoding))
    result = read_paths([seed, jsonl])
    assert result.problems == []
    assert [p.doc_id for p in result.papers] == ["wide#1", "wide#2", "w1"]
    assert result.papers[0].text.startswith("We propose Café-Net, a naïve method")


def test_utf16_without_byte_order_mark_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "nobom.txt"
    path.write_bytes(_seed_text(_abstract(1)).encode("utf-16-le"))
    result = read_file(path)
    assert (result.problems, [p.text for p in result.papers]) == ([], [_abstract(1)])


def test_control_characters_and_terminal_escapes_are_removed_and_reported_once_per_line(tmp_path: Path) -> None:
    seed = tmp_path / "ctrl.txt"
    seed.write_bytes(
        _seed_text(_abstract(1)).encode()
        + b"\n" + b"filler " * 1300  # past the first 8 KB the binary check looks at
        + b"\n\nWe propose \x1b[1;31mRedNet\x1b[0m\x00, a method\x07 that \x1b]0;title\x07improves ranking by 9 points.\n"
    )
    jsonl = tmp_path / "ctrl.jsonl"
    jsonl.write_text(json.dumps({"id": "j\x1b[2J1", "title": "Red\x00 \x1b[31mNet", "abstract": _abstract(1) + "\x1b[0m"}))
    csvf = tmp_path / "ctrl.csv"
    csvf.write_text(f"id,title,abstract\nc1,Clean,{_plain(1)}\nc2,Bell\x07,{_plain(2)}\x7f\x9b31m\n")
    result = read_paths([seed, jsonl, csvf])
    texts = {p.doc_id: p for p in result.papers}
    assert texts["ctrl#3"].text == "We propose RedNet, a method that improves ranking by 9 points."
    assert (texts["j1"].title, texts["j1"].text) == ("Red Net", _abstract(1))
    assert (texts["c2"].title, texts["c2"].text) == ("Bell", _plain(2))
    assert [str(p) for p in result.problems] == [
        f"{seed}:7: control characters or terminal escape sequences removed",
        f"{jsonl}:1: control characters or terminal escape sequences removed",
        f"{csvf}:3: control characters or terminal escape sequences removed",
    ]
    for paper in result.papers:
        assert not any(c in paper.text + paper.title for c in "\x00\x1b\x07\x7f\x9b")


def test_a_short_first_line_that_is_no_heading_is_kept_as_abstract_text(tmp_path: Path) -> None:
    path = tmp_path / "headless.txt"
    path.write_text(f"TinyNet in brief\nIt is small and {_abstract(1)}\n\n{_abstract(2)}\n")
    result = read_file(path)
    assert [p.text for p in result.papers] == [f"TinyNet in brief It is small and {_abstract(1)}", _abstract(2)]
    assert [str(p) for p in result.problems] == [f"{path}:1: no header line 'ICML 2026 Papers'; read anyway"]


@pytest.mark.parametrize(("first", "problem"), [
    ("NeurIPS 2025 Papers", None),
    ("Abstracts of the graph track", None),
    ("Graph Methods Overview", "first line 'Graph Methods Overview' taken as the header line, not as an abstract"),
])
def test_a_heading_first_line_is_the_header(tmp_path: Path, first: str, problem: str | None) -> None:
    path = tmp_path / "other.txt"
    path.write_text(f"{first}\n\n{_abstract(1)}\n\n{_abstract(2)}\n")
    result = read_file(path)
    assert [p.text for p in result.papers] == [_abstract(1), _abstract(2)]
    assert [p.message for p in result.problems] == ([problem] if problem else [])
    assert all(p.line == 1 for p in result.problems)


def test_an_abstract_over_the_limit_is_cut_at_a_sentence_and_reported(tmp_path: Path) -> None:
    sentence = "We propose HugeNet, a method that improves retrieval quality on many benchmarks. "
    huge = sentence * 1_200  # 98,400 characters: under the abstract's limit (rag_bot/reading/limits.py), so cut
    seed = tmp_path / "huge.txt"
    seed.write_text(_seed_text(_abstract(1), huge))
    jsonl = tmp_path / "huge.jsonl"
    jsonl.write_text(json.dumps({"id": "h1", "title": "T" * 700, "abstract": huge}) + "\n")
    csvf = tmp_path / "huge.csv"
    csvf.write_text(f'id,title,abstract\nh2,Huge,"{huge}"\nh3,Small,{_plain(3)}\n')
    result = read_paths([seed, jsonl, csvf], max_chars=1000)
    by_id = {p.doc_id: p for p in result.papers}
    assert list(by_id) == ["huge#1", "huge#2", "h1", "h2", "h3"]
    cut = (sentence * 12).strip()  # 12 whole sentences fit in 1000 characters
    assert len(cut) <= 1000
    assert by_id["huge#2"].text == by_id["h1"].text == by_id["h2"].text == cut
    assert by_id["huge#1"].text == _abstract(1) and by_id["h3"].text == _plain(3)
    assert len(by_id["h1"].title) == 300
    assert [str(p) for p in result.problems] == [
        f"{seed}:5: abstract cut to {len(cut)} characters",
        f"{jsonl}:1: abstract cut to {len(cut)} characters",
        f"{jsonl}:1: title cut to 300 characters",
        f"{csvf}:2: abstract cut to {len(cut)} characters",
    ]


def test_the_default_limit_is_the_settings_default(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"id": "l", "title": "Long", "abstract": "word " * 10_000}))
    result = read_file(path)
    assert len(result.papers[0].text) <= 20_000
    assert [p.message for p in result.problems] == [f"abstract cut to {len(result.papers[0].text)} characters"]


def test_seed_files_of_the_same_name_in_two_folders_get_distinct_stable_ids(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    for folder, n in (("2024", 1), ("2025", 2)):
        (root / folder).mkdir(parents=True)
        (root / folder / "papers.txt").write_text(_seed_text(_abstract(n), _abstract(n + 10)))
    (root / "other.txt").write_text(_seed_text(_abstract(5)))
    by_folder = read_paths([root])
    assert by_folder.problems == []
    assert [(p.doc_id, p.source, p.text) for p in by_folder.papers] == [
        ("2024/papers#1", "2024/papers.txt", _abstract(1)),
        ("2024/papers#2", "2024/papers.txt", _abstract(11)),
        ("2025/papers#1", "2025/papers.txt", _abstract(2)),
        ("2025/papers#2", "2025/papers.txt", _abstract(12)),
        ("other#1", "other.txt", _abstract(5)),  # a unique stem keeps its plain id
    ]
    # The same files named another way (files, relative to elsewhere, twice) get the same ids.
    by_files = read_paths([root / "2025" / "papers.txt", root / "2024" / ".." / "2024" / "papers.txt",
                           root / "other.txt", root / "2025" / "papers.txt"])
    assert sorted(p.doc_id for p in by_files.papers) == sorted(p.doc_id for p in by_folder.papers)
    assert by_files.problems == []


def test_seed_ids_of_the_seeds_folder_are_unchanged_when_read_with_other_files(tmp_path: Path) -> None:
    (tmp_path / "extra.txt").write_text(_seed_text(_abstract(1)))
    result = read_paths([SEEDS, tmp_path / "extra.txt", SEEDS / f"{FILE_A}.txt"])
    assert result.problems == []
    assert f"{FILE_A}#13" in {p.doc_id for p in result.papers} and len(result.papers) == 39


def test_a_path_the_system_refuses_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text(_seed_text(_abstract(1)))
    long = tmp_path / ("x" * 5000 + ".txt")
    result = read_paths([long, good])
    assert [p.doc_id for p in result.papers] == ["good#1"]
    assert [(p.path, p.message) for p in result.problems] == [(str(long), "cannot read (File name too long)")]


def test_a_scan_holds_no_paper_and_streams_the_same_papers_and_problems(tmp_path: Path) -> None:
    """What an ingest reads (`scan_paths`): the problems and the count first, then the same papers as `read_paths`
    when iterated, read again from the files (CR, CRLF and LF line endings alike, gzipped or not)."""
    from rag_bot.reading.corpus import PaperStream, scan_paths

    lines = [json.dumps({"id": f"s-{n}", "title": f"Streamed {n}", "abstract": _abstract(n)}) for n in range(5)]
    lines[2] = '{"id": "broken", '
    plain = tmp_path / "a.jsonl"
    plain.write_text("\r\n".join(lines[:3]) + "\r" + "\n".join(lines[3:]) + "\n")
    packed = tmp_path / "b.jsonl.gz"
    packed.write_bytes(gzip.compress(
        (json.dumps({"id": "s-1", "title": "dup", "abstract": _abstract(9)}) + "\n"
         + json.dumps({"id": "g-1", "title": "Packed", "abstract": _abstract(8)})).encode()
    ))
    whole, scan = read_paths([plain, packed]), scan_paths([plain, packed])
    assert isinstance(scan.papers, PaperStream) and len(scan.papers) == len(whole.papers) == 5
    assert [str(p) for p in scan.problems] == [str(p) for p in whole.problems]
    assert any(p.line == 3 and "JSON" in p.message for p in scan.problems)
    assert [(p.doc_id, p.title, p.text) for p in scan.papers] == [(p.doc_id, p.title, p.text) for p in whole.papers]
    assert scan.files == whole.files == 2
    # Read again at each iteration: a file changed since the scan is read as it is now.
    plain.write_text(lines[0] + "\n")
    assert [(p.doc_id, p.title) for p in scan.papers] == [("s-0", "Streamed 0"), ("s-1", "dup"), ("g-1", "Packed")]


@pytest.mark.parametrize("suffix", [".txt", ".jsonl", ".csv", ".jsonl.gz"])
def test_random_bytes_without_a_nul_are_not_a_text_corpus_file(tmp_path: Path, suffix: str) -> None:
    import random

    noise = bytes(b for b in random.Random(19).randbytes(4000) if b)  # no NUL: the old binary check missed it
    path = tmp_path / f"noise{suffix}"
    path.write_bytes(gzip.compress(noise) if suffix.endswith(".gz") else noise)
    # Text in a legacy encoding has a few undecodable bytes, not a majority: still read, its lines reported.
    french = tmp_path / "french.txt"
    french.write_bytes(_seed_text("Nous présentons RéseauNet, une méthode qui améliore la précision des modèles "
                                  "déjà entraînés.").encode("latin-1"))
    result = read_paths([path, french])
    assert [p.doc_id for p in result.papers] == ["french#1"]
    assert result.papers[0].text.startswith("Nous pr\ufffdsentons")
    assert [str(p) for p in result.problems] == [
        f"{path}: not a text corpus file (binary, or text in another encoding than UTF-8 or UTF-16: save it as "
        "UTF-8); skipped",
        f"{french}:3: not UTF-8 text (invalid bytes shown as \ufffd)",
    ]


def test_a_malformed_year_is_reported_per_record_and_the_paper_kept_without_one(tmp_path: Path) -> None:
    good = [(2024, 2024), ("2024", 2024), (" 1999 ", 1999), (2024.0, 2024), (None, None), ("", None)]
    bad = ["twenty", 99999, "2026abc", 2024.5, -3, "２０２４", [2024]]
    years = [year for year, _ in good] + bad
    path = tmp_path / "years.jsonl"
    path.write_text("".join(
        json.dumps({"id": f"y{n}", "title": f"Y{n}", "abstract": _abstract(n), "year": year}) + "\n"
        for n, year in enumerate(years)
    ))
    result = read_file(path)
    assert [p.year for p in result.papers] == [kept for _, kept in good] + [None] * len(bad)
    assert [str(p) for p in result.problems] == [
        f"{path}:{len(good) + n + 1}: year {year!r} is not a year (1665-2100); paper kept without a year"
        for n, year in enumerate(bad)
    ]


def test_an_abstract_too_short_to_be_one_is_reported_and_skipped(tmp_path: Path) -> None:
    path = tmp_path / "short.jsonl"
    records = [("one", "Transformers"), ("placeholder", "No abstract available."), ("five", "We study sparse attention heads."),
               ("real", _abstract(1)), ("punct", "!!! ??? ... ,,, ;;;"), ("numbers", "1 2 3 4 5 6")]
    path.write_text("".join(json.dumps({"id": i, "title": i.title(), "abstract": a}) + "\n" for i, a in records))
    csv_path = tmp_path / "short.csv"
    csv_path.write_text("id,title,abstract\nc1,One word,TBD\n")
    result = read_paths([path, csv_path])
    assert [p.doc_id for p in result.papers] == ["five", "real"]
    assert [str(p) for p in result.problems] == [
        f"{path}:1: abstract has only 1 word (an abstract has at least 5); skipped",
        f"{path}:2: abstract has only 3 words (an abstract has at least 5); skipped",
        f"{path}:5: abstract has only 0 words (an abstract has at least 5); skipped",  # tokens without a letter
        f"{path}:6: abstract has only 0 words (an abstract has at least 5); skipped",
        f"{csv_path}:2: abstract has only 1 word (an abstract has at least 5); skipped",
    ]
