"""Shared fixtures: a real index of the seed abstracts, built once per test session in a temp folder."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
for _key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAG_BOT_CHROMA_URL", "RAG_BOT_STORAGE", "RAG_BOT_LLM"):
    os.environ.pop(_key, None)  # tests choose their own store and engine

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "seeds"
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def seed_storage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store folder holding the indexed seed abstracts."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    storage = tmp_path_factory.mktemp("seed-store")
    Engine(Settings(storage=storage)).ingest([SEEDS])
    return storage


@pytest.fixture(scope="session")
def engine(seed_storage: Path):
    """An engine over the seed index (shared: tests must not ingest into it)."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    return Engine(Settings(storage=seed_storage))


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def paper_with(engine, fragment: str) -> str:
    """doc_id of the one paper that introduces the name (else whose abstract contains the fragment)."""
    from rag_bot.text import clean_markup

    papers = engine.papers.values()
    hits = [p.doc_id for p in papers if fragment in p.aliases] or [
        p.doc_id for p in papers if fragment in clean_markup(p.text)
    ]
    assert len(hits) == 1, f"{fragment!r} should identify exactly one seed paper, got {hits}"
    return hits[0]
