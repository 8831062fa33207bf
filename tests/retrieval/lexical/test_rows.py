"""The id table (rag_bot/retrieval/lexical/rows.py): saved and memory-mapped, it gives every id's row and every
row's id, as the list and dictionary it replaces would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_bot.retrieval.lexical.rows import IdTable

_ids = st.lists(st.text(min_size=1, max_size=12).filter(lambda s: "\x00" not in s), unique=True, max_size=40)


@settings(max_examples=150, deadline=None)
@given(_ids, st.lists(st.text(max_size=14), max_size=10))
def test_the_table_answers_as_the_list_and_dict_it_replaces(ids, others):
    table = IdTable.build(ids)
    assert list(table) == ids and len(table) == len(ids)
    assert [table[n] for n in range(len(ids))] == ids
    assert dict(table.rows) == {d: n for n, d in enumerate(ids)}
    for other in others:
        assert (other in table.rows) == (other in ids)
        assert table.rows.get(other) == ({d: n for n, d in enumerate(ids)}.get(other))


def test_a_saved_table_loads_back_memory_mapped(tmp_path):
    ids = ["2401.00001", "sim0000003", "Ünïcode-paper#1", "a", "doi:10.1/x y"]
    IdTable.build(ids).save(tmp_path)
    table = IdTable.load(tmp_path)
    assert list(table) == ids and table.rows["Ünïcode-paper#1"] == 2 and "b" not in table.rows
    assert table[1:3] == ["sim0000003", "Ünïcode-paper#1"]
