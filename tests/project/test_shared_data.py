"""Extra tests on the shared real-world data (skipped in a user's clone, which has no ../shared)."""

from __future__ import annotations

import pytest

from rag_bot.reading.corpus import read_file
from tests.conftest import SHARED

ML_ABSTRACTS = SHARED / "data" / "ml_abstracts.jsonl.gz"


@pytest.mark.skipif(not ML_ABSTRACTS.exists(), reason="../shared/data/ml_abstracts.jsonl.gz not found (not in a user's clone)")
def test_the_22k_real_abstracts_read_cleanly_with_their_metadata():
    result = read_file(ML_ABSTRACTS)
    # A few real abstracts hold control characters: they are cleaned and reported, the records are kept.
    assert {p.message for p in result.problems} <= {"control characters or terminal escape sequences removed"}
    assert len(result.problems) < 50
    assert len(result.papers) == 22148
    assert not any("\x00" in p.text or "\x1b" in p.text for p in result.papers)
    by_id = {p.doc_id: p for p in result.papers}
    assert len(by_id) == len(result.papers)
    sample = next(p for p in result.papers if p.doc_id.startswith("icml2019-"))
    assert sample.venue and sample.year == 2019 and sample.authors and sample.url
    assert sample.url in sample.links
