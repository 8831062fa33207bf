"""The filter columns (rag_bot/retrieval/lexical/columns.py): a filter applied to the arrays lets through exactly
the papers `Filters.matches` lets through, whatever the fields hold."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_bot.retrieval.lexical.columns import Allowed, Columns
from rag_bot.types import Filters, Paper

_WORDS = ["ICML", "icml workshop", "NeurIPS", "ACL", "Ada Lovelace", "Alan M. Turing", "Grace Hopper", "turing",
          "a.jsonl", "icml2019.bib", "x"]
_text = st.sampled_from(_WORDS) | st.text(alphabet="abcIJ .-", max_size=6)
_paper = st.builds(
    lambda n, venue, year, authors, source: Paper(doc_id=f"p{n}", title="t", text="a", source=source, venue=venue,
                                                  year=year, authors=authors),
    st.integers(0, 10**6), st.none() | _text, st.none() | st.integers(1990, 2030), st.lists(_text, max_size=4), _text,
)
_filters = st.builds(
    lambda venue, years, author, source: Filters(venue=venue, year_min=years[0], year_max=years[1], author=author,
                                                 source=source),
    st.none() | _text, st.tuples(st.none() | st.integers(1990, 2030), st.none() | st.integers(1990, 2030)),
    st.none() | _text, st.none() | _text,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_paper, max_size=12), _filters)
def test_the_columns_let_through_exactly_the_papers_the_filter_matches(papers, filters):
    mask = Columns.build(papers).mask(filters)
    assert mask.tolist() == [filters.matches(p) for p in papers]


def test_saved_columns_load_back_and_filter_alike(tmp_path):
    papers = [Paper(doc_id=f"p{n}", title="t", text="a", source=f"file{n % 3}.jsonl", venue=["ICML", "ACL", None][n % 3],
                    year=2015 + n % 10, authors=[f"Author {n % 7}", "Ada Lovelace"] if n % 2 else [])
              for n in range(50)]
    Columns.build(papers).save(tmp_path)
    loaded = Columns.load(tmp_path)
    for filters in (Filters.parse(venue="icml"), Filters.parse(year="2019-2021", author="author 3"),
                    Filters.parse(source="file1", author="lovelace"), Filters.parse(year="2030")):
        assert loaded.mask(filters).tolist() == [filters.matches(p) for p in papers]


def test_allowed_answers_membership_and_counts_like_the_set_it_stands_for():
    ids = ["a", "b", "c", "d"]
    allowed = Allowed(ids, {d: n for n, d in enumerate(ids)}, np.array([True, False, True, False]))
    assert len(allowed) == 2 and sorted(allowed) == ["a", "c"]
    assert "a" in allowed and "b" not in allowed and "zzz" not in allowed and 3 not in allowed
