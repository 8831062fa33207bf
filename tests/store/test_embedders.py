"""The model that made a store's vectors is the store's truth (issue 37): `rag-bot stats` and `rag-bot doctor`, run
without the embedding settings the store was made with, name that model and where it was, say that the settings
choose another, and give advice that works (the settings that choose it again, or `ingest --reembed`), never an
ingest or `--rebuild` that would be refused or re-embed the store with another model. The server is the stand-in
of tests/store/test_remote_embedding.py (a real loopback HTTP server computing the shipped model's vectors)."""

from __future__ import annotations

import json
import re
import shlex
import shutil

import pytest

from rag_bot.engine import Engine
from rag_bot.settings import Settings
from rag_bot.store.embedding import model_files
from rag_bot.surfaces.cli import main
from tests.store.test_remote_embedding import StandIn, embeddings_server, remote

QUESTION = "What does steering with sparse autoencoders do?"


@pytest.fixture(scope="module")
def served(few_papers, tmp_path_factory):
    """A store embedded through the stand-in embeddings server, and the server's URL (still serving)."""
    with embeddings_server(StandIn()) as url:
        storage = tmp_path_factory.mktemp("served") / "store"
        Engine(remote(storage, url)).ingest([few_papers])
        yield storage, url


@pytest.fixture(autouse=True)
def no_embedding_settings(monkeypatch):
    for name in ("RAG_BOT_EMBED_URL", "RAG_BOT_EMBED_MODEL", "RAG_BOT_EMBED_PATH", "RAG_BOT_EMBED_DIMENSIONS"):
        monkeypatch.delenv(name, raising=False)


def cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def advised(text: str) -> dict[str, str]:
    """The settings the advice says to set ("set RAG_BOT_X=... RAG_BOT_Y=...;"), as a user pastes them."""
    found = re.search(r"set (RAG_BOT_EMBED_\S+=.*?);", text)
    assert found, text
    return dict(word.split("=", 1) for word in shlex.split(found.group(1)) if "=" in word)


def test_stats_and_doctor_without_the_servers_settings_name_its_model_and_advice_that_works(served, capsys,
                                                                                           monkeypatch):
    storage, url = served
    code, stats = cli(capsys, "--storage", str(storage), "stats")
    assert code == 0
    assert f"embedding: api:minilm-stand-in/256/160/32/v2-mean (served at {url})" in stats
    assert "all-MiniLM-L6-v2-onnx-int8/" not in stats  # the settings' model is not shown as the store's
    assert "but the settings choose all-MiniLM-L6-v2-onnx-int8" in stats
    code, as_json = cli(capsys, "--storage", str(storage), "stats", "--json")
    figures = json.loads(as_json)
    assert figures["embedding"].startswith("api:minilm-stand-in/") and figures["embedding_where"] == f"served at {url}"
    code, doctor = cli(capsys, "--storage", str(storage), "doctor")
    assert code == 1 and f"embedding: api:minilm-stand-in/256/160/32/v2-mean (served at {url})" in doctor
    # Neither an ingest (refused: another model) nor a rebuild (would re-embed it with MiniLM) is advised.
    assert "--rebuild" not in doctor and "run `rag-bot ingest` with the same sources" not in doctor
    assert "indexed with another model" not in doctor and "rag-bot ingest --reembed" in doctor
    # The advice works: with the settings it names, the store is healthy and answers.
    settings = advised(doctor)
    assert settings == {"RAG_BOT_EMBED_URL": url, "RAG_BOT_EMBED_MODEL": "minilm-stand-in"}
    for name, value in settings.items():
        monkeypatch.setenv(name, value)
    code, doctor = cli(capsys, "--storage", str(storage), "doctor")
    assert code == 0 and doctor.rstrip().endswith("healthy"), doctor
    assert Engine(Settings(storage=storage)).ask(QUESTION).grounded


def test_a_store_made_by_a_model_folder_names_the_folder_to_set(few_papers, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "models" / "my-minilm"
    folder.mkdir(parents=True)
    for path in model_files():
        shutil.copy(path, folder / path.name)
    storage = tmp_path / "store"
    Engine(Settings(storage=storage, embed_path=folder, sentence_vectors="on-demand")).ingest([few_papers])
    code, doctor = cli(capsys, "--storage", str(storage), "doctor")
    assert code == 1 and "embedding: local:my-minilm/" in doctor and f"model folder: {folder}" in doctor
    assert "--rebuild" not in doctor and "indexed with another model" not in doctor
    settings = advised(doctor)
    assert settings == {"RAG_BOT_EMBED_PATH": str(folder)}
    monkeypatch.setenv("RAG_BOT_EMBED_PATH", settings["RAG_BOT_EMBED_PATH"])
    code, doctor = cli(capsys, "--storage", str(storage), "doctor")
    assert code == 0 and doctor.rstrip().endswith("healthy"), doctor


def test_a_server_url_with_credentials_is_recorded_masked_and_said_so(few_papers, tmp_path, capsys):
    with embeddings_server(StandIn()) as url:
        storage = tmp_path / "store"
        Engine(remote(storage, url.replace("http://", "http://u:s3cret@"))).ingest([few_papers])
    code, stats = cli(capsys, "--storage", str(storage), "stats")
    masked = url.replace("http://", "http://***@")
    assert advised(stats)["RAG_BOT_EMBED_URL"] == masked and "credentials masked: put them back" in stats
    assert "s3cret" not in stats
    assert not [p for p in storage.rglob("*") if p.is_file() and b"s3cret" in p.read_bytes()]
