"""Property-based tests of the corpus readers: no input makes them raise or yield a bad paper (issue 10)."""

from __future__ import annotations

import csv
import gzip
import io
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_bot.reading.corpus import read_file, read_paths
from rag_bot.types import Paper, Problem

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SUFFIXES = (".txt", ".jsonl", ".csv", ".jsonl.gz")
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252")

words = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
sentence = st.lists(st.one_of(words, st.sampled_from(["We", "propose", "Net,", "a", "method.", "\x1b[31m", "\x00",
                                                       "\n", "\n\n", '"', ",", "\ud800", "\r"])), max_size=40)
text_values = sentence.map(" ".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | text_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(words, inner, max_size=3),
    max_leaves=8,
)
records = st.dictionaries(
    st.sampled_from(["id", "title", "abstract", "venue", "year", "authors", "url", "other"]) | words,
    json_values | text_values,
    max_size=8,
)

good_records = st.fixed_dictionaries(
    {"id": text_values, "title": text_values, "abstract": text_values},
    optional={"venue": json_values, "year": json_values, "authors": json_values, "url": json_values},
)


def _check(result, paths: list[Path]) -> None:
    ids = [p.doc_id for p in result.papers]
    assert len(ids) == len(set(ids))
    for paper in result.papers:
        assert isinstance(paper, Paper)
        assert paper.text.strip() and paper.doc_id
        for value in (paper.text, paper.title, paper.doc_id):
            assert "\x00" not in value and "\x1b" not in value
        assert paper.content_hash  # the text can be encoded
    for problem in result.problems:
        assert isinstance(problem, Problem) and problem.path and problem.message
        str(problem).encode()


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


@SETTINGS
@given(data=st.binary(max_size=3000), suffix=st.sampled_from(SUFFIXES))
def test_arbitrary_bytes_never_raise(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "f" + suffix, data)
        _check(read_file(path), [path])


@SETTINGS
@given(lines=st.lists(text_values, max_size=12), encoding=st.sampled_from(ENCODINGS),
       suffix=st.sampled_from(SUFFIXES), header=st.booleans())
def test_arbitrary_text_in_any_encoding_never_raises(lines: list[str], encoding: str, suffix: str,
                                                     header: bool) -> None:
    body = ("ICML 2026 Papers\n\n" if header and suffix == ".txt" else "")
    body += ("id,title,abstract,authors\n" if header and suffix == ".csv" else "") + "\n".join(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "f" + suffix, body.encode(encoding, errors="surrogatepass" if "utf" in encoding
                                                           else "replace"))
        _check(read_file(path), [path])


@SETTINGS
@given(rows=st.lists(records, max_size=6), junk=st.lists(text_values, max_size=2))
def test_arbitrary_json_structures_never_raise(rows: list[dict], junk: list[str]) -> None:
    _check_jsonl(rows, junk)


@SETTINGS
@given(rows=st.lists(good_records, min_size=1, max_size=6))
def test_records_of_any_text_give_clean_papers(rows: list[dict]) -> None:
    _check_jsonl(rows, [])


def _check_jsonl(rows: list[dict], junk: list[str]) -> None:
    lines = [json.dumps(row, ensure_ascii=True) for row in rows] + junk
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "f.jsonl", "\n".join(lines).encode("utf-8", errors="surrogatepass"))
        _check(read_file(path), [path])


@SETTINGS
@given(rows=st.lists(st.lists(text_values, min_size=0, max_size=5), max_size=6),
       header=st.permutations(["id", "title", "abstract", "authors", "year"]))
def test_arbitrary_csv_rows_never_raise(rows: list[list[str]], header: list[str]) -> None:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "f.csv", out.getvalue().encode("utf-8", errors="surrogatepass"))
        _check(read_file(path), [path])


@SETTINGS
@given(files=st.lists(st.tuples(st.sampled_from(["a", "b", "a/b", "b/a", "c/a"]), st.sampled_from(["x", "y"]),
                                st.sampled_from(SUFFIXES), st.lists(text_values, min_size=1, max_size=4)),
                      max_size=6))
def test_folders_of_files_give_unique_ids(files: list[tuple[str, str, str, list[str]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written = []
        for folder, stem, suffix, lines in files:
            (root / folder).mkdir(parents=True, exist_ok=True)
            written.append(_write(root / folder, stem + suffix, "\n\n".join(lines).encode("utf-8", "surrogatepass")))
        _check(read_paths([root]), written)
        _check(read_paths(written), written)
