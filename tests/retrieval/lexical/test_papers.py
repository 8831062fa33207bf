"""The lexical cache's records compressed one by one against a shared dictionary: each comes back exactly, alone
and in any order, for a collection smaller than the dictionary too, and smaller than stored plain."""

from __future__ import annotations

import io
import json
import random

import pytest

from rag_bot.retrieval.lexical.papers import WINDOW, RecordReader, RecordWriter
from tests.conftest import SEEDS


def _records(n: int) -> list[bytes]:
    texts = [p.read_text(encoding="utf-8") for p in sorted(SEEDS.glob("*.txt"))]  # the seed abstracts
    rng = random.Random(0)
    return [json.dumps([f"Paper {i} – naïve ∑", rng.choice(texts)[:rng.randint(0, 3000)], i],
                       ensure_ascii=False).encode() for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 5, 400])
def test_every_record_comes_back_alone_in_any_order(n: int) -> None:
    records = _records(n)
    out = io.BytesIO()
    writer = RecordWriter(out)
    for record in records:
        writer.add(record)
    writer.close()
    assert len(writer.offsets) == n + 1 and len(writer.dictionary) <= WINDOW
    blob, read = out.getvalue(), RecordReader(writer.dictionary)
    for i in random.Random(1).sample(range(n), n):
        assert read(blob[writer.offsets[i]:writer.offsets[i + 1]]) == records[i]
    if n == 400:
        assert len(blob) < 0.6 * sum(map(len, records)), "abstracts take under 60 % of their plain size"
