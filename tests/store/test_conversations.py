"""The saved-conversations store: round trip, owners, delete, permalinks, bad ids and a broken file."""

from __future__ import annotations

import logging
import sqlite3
import threading
from contextlib import closing
from pathlib import Path

from rag_bot.store.conversations import FILE_NAME, Conversations, title_of
from rag_bot.types import Answer, Citation


def _answer(text: str = "x is y [1].", notice: str | None = None) -> Answer:
    return Answer(question="what is x?", mode="ask", answer=text, grounded=True, notice=notice,
                  retrieved=[{"doc_id": "x#1", "score": 0.9}], timings_ms={"total": 12.0},
                  citations=[Citation(n=1, doc_id="x#1", title="T", source="f.jsonl", quote="x is y.")])


def _clock() -> object:
    now = [1000.0]

    def tick() -> float:
        now[0] += 1
        return now[0]

    return tick


def test_round_trip_keeps_turns_in_order_with_their_answers(tmp_path: Path) -> None:
    store = Conversations(tmp_path, clock=_clock())  # type: ignore[arg-type]
    conv = store.create("", "what is x?")
    assert conv
    first = store.append(conv, "", "what is x?", _answer(notice="weakly supported"))
    second = store.append(conv, "", "and y?", None)
    assert first and second and first != second
    saved = store.load(conv, "")
    assert saved is not None and [s.turn.question for s in saved] == ["what is x?", "and y?"]
    assert saved[0].turn.answer == _answer(notice="weakly supported"), "the answer round-trips, notice included"
    assert saved[1].turn.answer is None and [s.link for s in saved] == [first, second]
    assert (tmp_path / FILE_NAME).is_file()
    # A second store on the same file (another process, a restart) sees the same.
    assert Conversations(tmp_path).load(conv, "") == saved


def test_list_is_newest_first_with_turn_counts_and_skips_empty_ones(tmp_path: Path) -> None:
    store = Conversations(tmp_path, clock=_clock())  # type: ignore[arg-type]
    old, new, empty = store.create("", "old " * 40), store.create("", "new"), store.create("", "never answered")
    assert old and new and empty
    store.append(old, "", "old", _answer())
    store.append(new, "", "new", _answer())
    store.append(new, "", "new 2", _answer())
    assert [(s.id, s.turns) for s in store.recent("")] == [(new, 2), (old, 1)]
    store.append(old, "", "old again", _answer())
    assert [s.id for s in store.recent("")] == [old, new], "extending a conversation moves it up"
    assert store.recent("")[0].title == title_of("old " * 40) and len(store.recent("")[0].title) <= 80


def test_owners_see_and_touch_only_their_own(tmp_path: Path) -> None:
    store = Conversations(tmp_path)
    ann = store.create("ann", "ann's question")
    assert ann and store.append(ann, "ann", "ann's question", _answer())
    assert store.recent("bob") == [] and store.recent("") == []
    assert store.load(ann, "bob") is None and store.load(ann, "") is None
    assert store.append(ann, "bob", "sneaky", _answer()) is None
    assert store.delete(ann, "bob") is False
    saved = store.load(ann, "ann")
    assert saved is not None and len(saved) == 1, "bob changed nothing"


def test_delete_removes_the_conversation_and_its_permalinks(tmp_path: Path) -> None:
    store = Conversations(tmp_path)
    conv = store.create("ann", "q")
    assert conv
    link = store.append(conv, "ann", "q", _answer())
    assert link
    shared = store.shared(link)
    assert shared is not None and shared.turn.question == "q" and shared.turn.answer == _answer()
    assert store.delete(conv, "ann") is True
    assert store.load(conv, "ann") is None and store.shared(link) is None and store.recent("ann") == []
    assert store.delete(conv, "ann") is False


def test_unknown_or_odd_ids_give_none_never_an_exception(tmp_path: Path) -> None:
    store = Conversations(tmp_path)
    for bad in ("nope", "", "x" * 5000, "' OR 1=1 --", None, 42):
        assert store.load(bad, "") is None  # type: ignore[arg-type]
        assert store.append(bad, "", "q", _answer()) is None  # type: ignore[arg-type]
        assert store.delete(bad, "") is False  # type: ignore[arg-type]
        assert store.shared(bad) is None  # type: ignore[arg-type]
    assert store.ok


def test_a_garbage_file_turns_saving_off_with_one_warning(tmp_path: Path, caplog) -> None:
    (tmp_path / FILE_NAME).write_bytes(b"this is not a database" * 100)
    store = Conversations(tmp_path)
    with caplog.at_level(logging.WARNING, logger="rag_bot.store.conversations"):
        assert store.create("", "q") is None
        assert store.recent("") == [] and store.load("x", "") is None and store.shared("x") is None
        assert store.delete("x", "") is False
    assert not store.ok and "not a database" in (store.error or "")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "saved conversations are off" in warnings[0].getMessage()


def test_an_unwritable_folder_turns_saving_off(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    store = Conversations(blocker / "data")
    assert store.create("", "q") is None and not store.ok


def test_threads_save_side_by_side(tmp_path: Path) -> None:
    store = Conversations(tmp_path)
    conv = store.create("", "q")
    assert conv
    threads = [threading.Thread(target=lambda: [store.append(conv, "", "q", _answer()) for _ in range(10)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    saved = store.load(conv, "")
    assert store.ok and saved is not None and len(saved) == 40 and len({s.link for s in saved}) == 40


def test_a_saved_turn_is_at_once_readable_by_the_permalink_page_and_after_a_restart(tmp_path: Path) -> None:
    """The chat's store keeps its connection open between turns; the permalink route (its own store on the same
    file) and a restarted server read every turn committed so far, and a failure mid-call is rolled back."""
    chat, page = Conversations(tmp_path, clock=_clock()), Conversations(tmp_path)  # type: ignore[arg-type]
    conv = chat.create("", "what is x?")
    assert conv
    links = []
    for i in range(3):
        link = chat.append(conv, "", f"question {i}", _answer())
        assert link
        links.append(link)
        shared = page.shared(link)
        assert shared is not None and shared.turn.question == f"question {i}", "readable as soon as it is saved"

    saved = [(s.title, s.updated) for s in page.recent("")]
    # The file refuses the next turn (as a full disk would) after the call has moved its conversation's time.
    with closing(sqlite3.connect(tmp_path / FILE_NAME)) as db:
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON turns BEGIN SELECT RAISE(ABORT, 'disk gone'); END")
        db.commit()
    assert chat.append(conv, "", "question 3", _answer()) is None and not chat.ok
    restarted = Conversations(tmp_path)
    assert [(s.title, s.updated) for s in restarted.recent("")] == saved, "the failed call left nothing behind"
    assert [s.link for s in restarted.load(conv, "") or []] == links
