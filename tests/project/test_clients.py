"""Third-party clients, as a new user would point them at rag-bot: the `llm` command-line tool (an OpenAI-compatible
client, streamed and not) at `rag-bot api`, and the MCP Inspector's command-line mode at `rag-bot mcp`.

Both are installed by `make install` (.venv/llm-cli, .venv/inspector); the tests skip, saying so, where they are
not (the Inspector needs npm, which .ci/run installs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import ROOT, paper_with, serving

pytestmark = pytest.mark.slow

LLM = ROOT / ".venv" / "llm-cli" / "bin" / "llm"
INSPECTOR = ROOT / ".venv" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
QUESTION = "which paper steers LLMs using correlated sparse autoencoder features?"


@pytest.fixture(scope="module")
def llm_home(engine, tmp_path_factory: pytest.TempPathFactory):
    """An `llm` configuration naming rag-bot's API as an OpenAI-compatible model, with the API serving."""
    if not LLM.exists():
        pytest.skip(f"{LLM} is not installed (make install sets it up)")
    from rag_bot.surfaces.api import create_api

    home = tmp_path_factory.mktemp("llm-home")
    with serving(create_api(engine)) as base:
        (home / "extra-openai-models.yaml").write_text(
            f'- model_id: rag-bot\n  model_name: rag-bot\n  api_base: "{base}/v1"\n')
        yield home


def _llm(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LLM_USER_PATH": str(home), "OPENAI_API_KEY": "unused"}
    return subprocess.run([str(LLM), *args], env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_llm_cli_gets_a_cited_answer(llm_home: Path, engine, stream: bool):
    got = _llm(llm_home, "-m", "rag-bot", *([] if stream else ["--no-stream"]), QUESTION)
    assert got.returncode == 0, got.stderr
    corr = paper_with(engine, "CorrSteer")
    assert "[1]" in got.stdout and "References:" in got.stdout and corr in got.stdout
    assert "Traceback" not in got.stderr
    # llm records the usage the API returned (word pieces of prompt and answer), in both modes.
    logs = _llm(llm_home, "logs", "-n", "1", "--json")
    record = json.loads(logs.stdout)[0]
    assert record["response"].strip() == got.stdout.strip()
    assert record["input_tokens"] and record["output_tokens"] and record["output_tokens"] > record["input_tokens"]


def _inspect(storage: Path, *args: str) -> dict:
    if not INSPECTOR.exists():
        pytest.skip(f"{INSPECTOR} is not installed (make install sets it up when npm is present)")
    rag_bot = Path(sys.executable).with_name("rag-bot")
    got = subprocess.run([str(INSPECTOR), "--cli", "-e", f"RAG_BOT_STORAGE={storage}", str(rag_bot), "mcp", *args],
                         capture_output=True, text=True, timeout=180)
    assert got.returncode == 0, got.stdout + got.stderr
    return json.loads(got.stdout)


def test_the_mcp_inspector_browses_reads_prompts_and_asks(seed_storage: Path, engine):
    listed = _inspect(seed_storage, "--method", "resources/list")["resources"]
    assert {r["name"] for r in listed} == set(engine.papers)  # every paper, under its doc_id
    corr = paper_with(engine, "CorrSteer")
    entry = next(r for r in listed if r["name"] == corr)
    assert entry["uri"] == f"paper://{quote(corr, safe='')}" and "CorrSteer" in entry["title"]

    read = _inspect(seed_storage, "--method", "resources/read", "--uri", entry["uri"])["contents"][0]["text"]
    assert read.startswith("# ") and engine.papers[corr].text.split(".")[0] in read

    prompts = {p["name"] for p in _inspect(seed_storage, "--method", "prompts/list")["prompts"]}
    assert prompts == {"summarize_area", "compare_papers"}
    prompt = _inspect(seed_storage, "--method", "prompts/get", "--prompt-name", "summarize_area",
                      "--prompt-args", "topic=sparse autoencoders")
    assert "sparse autoencoders" in prompt["messages"][0]["content"]["text"]

    called = _inspect(seed_storage, "--method", "tools/call", "--tool-name", "ask", "--tool-arg", f"question={QUESTION}")
    answer = json.loads(called["content"][0]["text"])
    assert answer["grounded"] and corr in [c["doc_id"] for c in answer["citations"]]
