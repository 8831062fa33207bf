"""The one place rag-bot reads its configuration (environment variables prefixed RAG_BOT_, or a .env file)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_storage() -> Path:
    """`storage` in a checkout or a folder that has one (or a `seeds/` folder); else the user's data folder
    ($XDG_DATA_HOME/rag-bot/storage, ~/.local/share/rag-bot/storage), so an installed `rag-bot` works anywhere."""
    if Path("storage").is_dir() or Path("seeds").is_dir():
        return Path("storage")
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "rag-bot" / "storage"


def packaged_seeds() -> Path:
    """The seed abstracts that ship inside the package (in an editable install: the checkout's seeds/)."""
    package = Path(__file__).resolve().parent
    shipped = package / "seeds"
    return shipped if shipped.is_dir() else package.parent / "seeds"


class Settings(BaseSettings):
    """Every knob of rag-bot, with its environment variable RAG_BOT_<NAME>."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_BOT_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # --- corpus and store -------------------------------------------------------------------------
    seeds: Path = Field(
        Path("seeds"), description="Folder (or file) ingested by default; the seeds shipped in the package when it "
        "does not exist."
    )
    storage: Path = Field(
        default_factory=default_storage,
        description="Folder of the persistent Chroma store (default: ./storage in a checkout, else the user's data "
        "folder).",
    )
    chroma_url: str | None = Field(
        None, description="http://host:port of a Chroma server (`chroma run`); overrides `storage`."
    )
    collection: str = Field("abstracts", description="Name prefix of the Chroma collections.")
    max_abstract_chars: int = Field(
        20000, ge=100, description="Longest abstract accepted (characters); longer records are cut, with a warning."
    )

    # --- chunking and embedding -----------------------------------------------------------------
    chunk_size: int = Field(
        160, description="Chunk size in tokens (SentenceSplitter); measured in docs/chunking.md."
    )
    chunk_overlap: int = Field(32, description="Token overlap between consecutive chunks.")
    max_tokens: int = Field(256, description="Embedding model input limit (MiniLM was trained at 256).")
    embed_batch_size: int = Field(16, description="Texts per embedding batch.")
    paper_vector: Literal["whole", "mean"] = Field(
        "mean", description="A paper's own vector: the mean of its chunk vectors (one model pass per paper), or "
        "its title and whole abstract embedded once more (`whole`: about twice the ingest time for one dev question "
        "at R@1 and one false refusal, noise-level; docs/benchmarks.md)."
    )

    # --- retrieval --------------------------------------------------------------------------------
    top_k: int = Field(10, description="Papers returned by retrieval (the JSON lists up to 10).")
    chunk_candidates: int = Field(40, description="Chunks fetched from each retriever before fusion.")
    retrieval: Literal["hybrid", "dense", "bm25"] = Field(
        "hybrid", description="Retriever: dense, BM25, or both fused (see docs/eval.md)."
    )
    dense_weight: float = Field(0.6, description="Weight of the dense ranking in the fusion.")
    feedback: bool = Field(
        True, description="Pseudo-relevance feedback for long questions (over 25 words); see docs/eval.md."
    )
    min_score: float = Field(
        0.30, description="Least cosine similarity of a paper to the question for it to be cited."
    )
    refusal_threshold: float = Field(
        0.61,
        description="The bot declines when its evidence score (best sentence similarity in the top 3 "
        "papers + margin weight x how far the best paper stands out + coverage weight x share of the "
        "question's words they contain) is below this; calibrated in docs/eval.md.",
    )
    focus_threshold: float = Field(
        0.75,
        description="A short question (at most 16 words) two or more of whose words appear in none of the top 3 "
        "papers needs at least this evidence score to be answered; calibrated in docs/eval.md.",
    )
    refusal_margin_weight: float = Field(1.0, description="Weight of the best paper's margin in the evidence score.")
    refusal_coverage_weight: float = Field(
        0.4, description="Weight of the question-word coverage of the top papers in the evidence score."
    )
    answer_papers: int = Field(6, description="Most papers an answer or summary cites.")
    support_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="A citation whose abstract backs its claim less than this (`support`) is "
        "flagged as weakly supported; calibrated in docs/eval.md."
    )

    # --- answer writing ---------------------------------------------------------------------------
    llm: Literal["auto", "offline", "openai", "local"] = Field(
        "auto", description="auto: an LLM when a key or base URL is set, else the offline composer."
    )
    openai_api_key: str | None = Field(
        None,
        validation_alias=AliasChoices("OPENAI_API_KEY", "RAG_BOT_OPENAI_API_KEY"),
        description="Key of the OpenAI API (OPENAI_API_KEY).",
    )
    openai_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("OPENAI_BASE_URL", "RAG_BOT_OPENAI_BASE_URL"),
        description="Base URL of any OpenAI-compatible server (OPENAI_BASE_URL).",
    )
    llm_model: str = Field("gpt-4o-mini", description="Chat model that writes answers (RAG_BOT_LLM_MODEL).")
    llm_timeout: float = Field(30.0, description="Seconds to wait for one LLM request.")
    llm_retries: int = Field(
        2, ge=0, description="Retries of a timed-out, 429 or 5xx LLM request, done by the openai client (backoff, "
        "Retry-After)."
    )
    llm_temperature: float = Field(0.1, description="Sampling temperature of the LLM.")
    llm_max_tokens: int = Field(700, description="Most tokens an LLM answer may have.")
    gguf: Path | None = Field(None, description="GGUF model file served by llama.cpp when RAG_BOT_LLM=local.")

    # --- chat server ------------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address the chat binds to.")
    port: int = Field(7860, description="Port of the chat.")
    auth: str | None = Field(
        None, description="user:password (or a file of such lines) to require a login for the chat."
    )
    max_upload_mb: int = Field(20, description="Largest corpus file the chat accepts for upload, in MB.")
    data: Path | None = Field(
        None, description="Folder of the saved conversations (RAG_BOT_DATA); default: the storage folder, or the "
        "user's data folder when the store is a Chroma server."
    )
    api_key: str | None = Field(
        None, description="Bearer key required by the OpenAI-compatible API (/v1) and the MCP endpoint (/mcp) "
        "(RAG_BOT_API_KEY); none: open, so keep RAG_BOT_HOST on loopback."
    )

    # --- operation --------------------------------------------------------------------------------
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="Least level logged to stderr (RAG_BOT_LOG_LEVEL); question text only at DEBUG."
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


    def data_path(self) -> Path:
        """Where the saved conversations live."""
        if self.data is not None:
            return self.data
        return self.storage if not self.chroma_url else default_storage().parent

    def seed_path(self) -> Path:
        """What `rag-bot ingest` with no path (and the chat on an empty store) indexes."""
        return self.seeds if self.seeds.exists() else packaged_seeds()


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (e.g. from CLI flags) on top."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
