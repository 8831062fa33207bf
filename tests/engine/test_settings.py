"""Settings: a bad RAG_BOT_ value is one line naming its variable, the value (masked if secret) and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_bot.settings import Settings, SettingsError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No RAG_BOT_ variable and no .env file but the test's own."""
    import os

    for key in list(os.environ):
        if key.startswith(("RAG_BOT_", "OPENAI_")):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


def _error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as caught:
        Settings()
    message = str(caught.value)
    assert "\n" not in message and "pydantic" not in message, message
    return message


@pytest.mark.parametrize(("variable", "value", "allowed"), [
    ("RAG_BOT_TOP_K", "abc", "a whole number, at least 1"),
    ("RAG_BOT_TOP_K", "0", "a whole number, at least 1"),  # 0 papers retrieved: every question was declined
    ("RAG_BOT_CHUNK_CANDIDATES", "0", "a whole number, at least 1"),
    ("RAG_BOT_ANSWER_PAPERS", "0", "a whole number from 1 to 10"),
    ("RAG_BOT_EMBED_BATCH_SIZE", "0", "a whole number, at least 1"),
    ("RAG_BOT_MAX_TOKENS", "1000", "a whole number from 3 to 512"),
    ("RAG_BOT_PORT", "70000", "a whole number from 1 to 65535"),
    ("RAG_BOT_PORT", "0", "a whole number from 1 to 65535"),
    ("RAG_BOT_MIN_SCORE", "1.5", "a number from 0 to 1"),
    ("RAG_BOT_DENSE_WEIGHT", "-0.1", "a number from 0 to 1"),
    ("RAG_BOT_SUPPORT_THRESHOLD", "2", "a number from 0 to 1"),
    ("RAG_BOT_ANSWER_CONFIDENCE", "1.5", "a number from 0 to 1"),
    ("RAG_BOT_LLM_TEMPERATURE", "3", "a number from 0 to 2"),
    ("RAG_BOT_LLM_TIMEOUT", "0", "a number, above 0"),
    ("RAG_BOT_LLM_MAX_TOKENS", "0", "a whole number, at least 1"),
    ("RAG_BOT_MAX_UPLOAD_MB", "0", "a whole number from 1 to 2048"),
    ("RAG_BOT_FEEDBACK", "maybe", "true or false"),
    ("RAG_BOT_RETRIEVAL", "fast", "one of hybrid, dense, bm25"),
    ("RAG_BOT_LOG_LEVEL", "loud", "one of DEBUG, INFO, WARNING, ERROR"),
    ("RAG_BOT_COLLECTION", "../elsewhere", "1 to 53 letters, digits"),  # also a folder name in the store
    ("RAG_BOT_CHROMA_URL", "localhost:8000", "an http:// or https:// URL"),
])
def test_a_bad_value_names_the_variable_the_value_and_what_is_allowed(monkeypatch, variable, value, allowed):
    message = _error(monkeypatch, **{variable: value})
    assert message.startswith(f"bad setting: {variable}=")
    assert repr(value.upper() if variable == "RAG_BOT_LOG_LEVEL" else value) in message
    assert f"must be {allowed}" in message


def test_overlap_not_below_the_chunk_size_names_both_variables(monkeypatch):
    message = _error(monkeypatch, RAG_BOT_CHUNK_OVERLAP="500")
    assert "RAG_BOT_CHUNK_OVERLAP=500 must be less than RAG_BOT_CHUNK_SIZE=160" in message
    assert "RAG_BOT_CHUNK_SIZE=100 must be at most RAG_BOT_MAX_TOKENS=64" in _error(
        monkeypatch, RAG_BOT_CHUNK_OVERLAP="10", RAG_BOT_CHUNK_SIZE="100", RAG_BOT_MAX_TOKENS="64")


def test_the_retired_refusal_settings_are_named_when_set(monkeypatch):
    # The fitted relevance decision replaced the evidence score and its four settings (docs/eval.md).
    message = _error(monkeypatch, RAG_BOT_REFUSAL_THRESHOLD="0.61")
    assert "RAG_BOT_REFUSAL_THRESHOLD" in message and "RAG_BOT_ANSWER_CONFIDENCE" in message


def test_credentials_in_a_url_are_masked(monkeypatch):
    message = _error(monkeypatch, RAG_BOT_CHROMA_URL="http://admin:s3cret@chroma.example:99999")
    assert "s3cret" not in message and "admin" not in message
    assert "RAG_BOT_CHROMA_URL='http://***@chroma.example:99999'" in message


def test_a_secret_setting_is_never_shown():
    with pytest.raises(SettingsError) as caught:
        Settings(api_key=1234567)  # type: ignore[arg-type]
    assert "1234567" not in str(caught.value) and "RAG_BOT_API_KEY='***'" in str(caught.value)


def test_every_bad_setting_is_named_on_the_one_line(monkeypatch):
    message = _error(monkeypatch, RAG_BOT_TOP_K="x", RAG_BOT_PORT="y")
    assert message.startswith("bad settings: ") and "RAG_BOT_TOP_K='x'" in message and "RAG_BOT_PORT='y'" in message


def test_a_bad_value_in_the_env_file_is_named_too(tmp_path):
    (tmp_path / ".env").write_text("RAG_BOT_TOP_K=0\n")
    with pytest.raises(SettingsError, match="RAG_BOT_TOP_K='0' must be a whole number, at least 1"):
        Settings()


def test_the_defaults_and_the_edges_of_each_range_are_valid():
    Settings()
    Settings(top_k=1, port=65535, min_score=0, dense_weight=1, chunk_overlap=0, chunk_size=256, answer_papers=10,
             chroma_url="https://chroma.example", openai_base_url="http://127.0.0.1:1/v1", collection="a.b-c_1")


@pytest.mark.parametrize("key", ["   ", " k3y", "k3y ", "two words"])
def test_an_api_key_with_spaces_is_refused(monkeypatch, key):
    """A key of spaces announced "(bearer key required)" yet matched no client: a mistake, named as one."""
    monkeypatch.setenv("RAG_BOT_API_KEY", key)
    with pytest.raises(SettingsError) as caught:
        Settings()
    assert "RAG_BOT_API_KEY='***'" in str(caught.value) and "without spaces" in str(caught.value)
    monkeypatch.setenv("RAG_BOT_API_KEY", "")
    assert Settings().api_key is None, "empty means unset"


# A seeds question the default declines that RAG_BOT_TOP_K=3 once answered (its 3 candidates' ranks and shares were
# read by a model fitted among 10), one it answers, and one off the collection's topics.
TOP_K_QUESTIONS = [
    "When I sample several answers and keep the best one, how can I tell which chain of thought is correct by looking "
    "at how the hidden states evolve over time rather than at token probabilities?",
    "How can I stop a voice-input chatbot from answering harmful spoken requests without making it refuse perfectly "
    "innocent ones?",
    "Can you recommend a paper about baking sourdough bread?",
]


def test_a_smaller_top_k_answers_and_declines_as_the_default_does(engine, seed_storage, monkeypatch):
    """RAG_BOT_TOP_K sets what a search returns; the questions' answers and refusals stay the default's."""
    from rag_bot.engine import Engine

    monkeypatch.setenv("RAG_BOT_TOP_K", "3")
    small = Engine(Settings(storage=seed_storage))
    assert small.settings.top_k == 3 and len(small.retriever.retrieve_papers(TOP_K_QUESTIONS[0])) == 3
    decisions = []
    for question in TOP_K_QUESTIONS:
        default, with_3 = engine.ask(question), small.ask(question)
        assert with_3.certainty == default.certainty, question
        assert [c.doc_id for c in with_3.citations] == [c.doc_id for c in default.citations], question
        assert with_3.retrieved == default.retrieved and len(default.retrieved) == 10
        decisions.append(default.certainty)
    assert decisions[1] == "confident" and decisions[2] == "none", decisions  # answered, and the bread declined


def test_a_candidate_count_the_relevance_model_was_not_fitted_with_is_refused(seed_storage, monkeypatch, capsys):
    """The relevance model records the candidates it was fitted among (10 for a direct answer, 40 for an area); another
    count is refused in one line naming the variable, the fitted count and the fix, not answered differently."""
    from rag_bot.engine import Engine
    from tests.conftest import run_main

    code, out, err = run_main(monkeypatch, capsys, seed_storage, "ask", TOP_K_QUESTIONS[1],
                              RAG_BOT_ASK_CANDIDATES="20")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("rag-bot: RAG_BOT_ASK_CANDIDATES=20, but the relevance model was fitted with 10 "
                               "candidates for a direct answer"), lines[0]
    assert "bench.fit.relevance --write" in lines[0]
    monkeypatch.delenv("RAG_BOT_ASK_CANDIDATES")
    with pytest.raises(SettingsError, match="RAG_BOT_AREA_CANDIDATES=60, but the relevance model was fitted with 40"):
        Engine(Settings(storage=seed_storage, area_candidates=60)).ask("Summarize the work on federated learning",
                                                                      mode="summary")
