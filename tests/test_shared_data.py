"""Extra tests on the shared real-world data (skipped in a user's clone, which has no ../shared)."""

from __future__ import annotations

import pytest

from rag_bot.corpus import read_file
from tests.conftest import SHARED

ML_ABSTRACTS = SHARED / "data" / "ml_abstracts.jsonl.gz"


@pytest.mark.skipif(not ML_ABSTRACTS.exists(), reason="../shared/data/ml_abstracts.jsonl.gz not found (not in a user's clone)")
def test_the_22k_real_abstracts_read_cleanly_with_their_metadata():
    result = read_file(ML_ABSTRACTS)
    assert result.problems == []
    assert len(result.papers) == 22148
    by_id = {p.doc_id: p for p in result.papers}
    assert len(by_id) == len(result.papers)
    sample = next(p for p in result.papers if p.doc_id.startswith("icml2019-"))
    assert sample.venue and sample.year == 2019 and sample.authors and sample.url
    assert sample.url in sample.links
