"""Property-based tests of the whole question path (hypothesis): questions made from the collection's own
vocabulary, in every mode and with any paper count, always get an answer that keeps the contract; and answers
keep coming while an ingest changes the collection."""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_bot.evaluation.evaluate import citation_integrity
from rag_bot.text import clean_markup
from rag_bot.types import Answer
from tests.conftest import SEEDS

_WORD = re.compile(r"[A-Za-z][A-Za-z\-]{2,}")
TEMPLATES = [
    "{}", "tell me about {}", "explain {}", "summarize the work on {}", "what does the collection say about {}?",
    "compare {} and {}", "which papers study {}?", "where is the code of {}?", "how much does {} improve {}?",
]


def seed_vocabulary() -> list[str]:
    """Words of the seed abstracts (read from the files, so the test needs no store to build its strategy)."""
    words: set[str] = set()
    for path in sorted(SEEDS.glob("*.txt")):
        words.update(w.lower() for w in _WORD.findall(clean_markup(path.read_text(encoding="utf-8"))))
    return sorted(words)


VOCABULARY = seed_vocabulary()
phrases = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4).map(" ".join)
questions = st.builds(
    lambda template, parts: template.format(*parts[: template.count("{}")]),
    st.sampled_from(TEMPLATES), st.lists(phrases, min_size=2, max_size=2),
)


def check(answer: Answer) -> None:
    assert answer.answer.strip()
    assert answer.grounded == bool(answer.citations)
    assert citation_integrity(answer), answer.answer
    assert len(answer.retrieved) <= 10


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=questions, mode=st.sampled_from([None, "ask", "summary", "compare"]),
       papers=st.one_of(st.none(), st.integers(min_value=1, max_value=10)))
def test_any_question_from_the_collections_words_gets_a_contract_keeping_answer(engine, question, mode, papers):
    check(engine.ask(question, mode=mode, max_papers=papers))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.text(alphabet=st.characters(exclude_categories=()), min_size=1, max_size=300))
def test_any_text_at_all_is_answered_or_declined_never_an_exception(engine, question):
    from rag_bot.errors import EmptyQuestionError

    try:
        answer = engine.ask(question)
    except EmptyQuestionError:
        assert not "".join(ch for ch in question if ch.isprintable()).strip()
        return
    check(answer)


@pytest.mark.slow
def test_answers_keep_coming_while_an_ingest_changes_the_collection(tmp_path):
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    engine = Engine(Settings(storage=tmp_path / "store"))
    engine.ingest([SEEDS])
    extra = tmp_path / "extra.jsonl"
    extra.write_text("".join(
        f'{{"id": "x{i}", "title": "Synthetic paper {i}", "abstract": "We propose method {i} for sparse '
        f'autoencoders that steer activations of language models and report gains on benchmark {i}."}}\n'
        for i in range(40)
    ), encoding="utf-8")
    errors: list[BaseException] = []
    answers: list[Answer] = []
    stop = threading.Event()

    def ask_repeatedly() -> None:
        while not stop.is_set():
            try:
                answers.append(engine.ask("What does CorrSteer do with sparse autoencoder features?"))
            except BaseException as exc:  # noqa: BLE001 - any failure of a concurrent reader is the finding
                errors.append(exc)

    readers = [threading.Thread(target=ask_repeatedly) for _ in range(3)]
    for thread in readers:
        thread.start()
    engine.ingest([extra])
    stop.set()
    for thread in readers:
        thread.join()
    assert not errors, errors[:3]
    assert answers and all(a.grounded for a in answers)
    assert len(engine.papers) == 78
