"""The shared data model: what every surface (CLI JSON, chat, tests) speaks."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

Mode = Literal["ask", "summary", "compare"]


class Paper(BaseModel):
    """One abstract of the collection."""

    doc_id: str = Field(description="`<file stem>#<n>` for seed files, the record id for JSONL.")
    title: str = Field(description="Display title (for seed files, derived from the text).")
    text: str = Field(description="The abstract as stored, markup included.")
    source: str = Field(description="File name the paper came from.")
    aliases: list[str] = Field(default_factory=list, description="Names of the paper's method/benchmark.")
    links: list[str] = Field(default_factory=list, description="URLs found in the text or the record.")
    venue: str | None = None
    year: int | None = None
    authors: list[str] = Field(default_factory=list)
    url: str | None = None

    @property
    def content_hash(self) -> str:
        """Hash of everything that is embedded or shown; a change triggers re-indexing."""
        payload = "\x1f".join([self.title, self.text, self.source, " ".join(self.aliases)])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


class Problem(BaseModel):
    """A piece of input that could not be read, with where it is."""

    path: str
    line: int | None = None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


class ScoredPaper(BaseModel):
    """A paper ranked for a question."""

    paper: Paper
    score: float = Field(description="Fused ranking score (higher is better).")
    similarity: float = Field(description="Best dense cosine similarity of its chunks to the question.")
    named: bool = Field(False, description="The question names this paper.")
    coverage: float = Field(
        0.0, description="Share of the question's content words (IDF-weighted, stemmed) found in the paper."
    )


class Citation(BaseModel):
    """A numbered source of an answer."""

    n: int
    doc_id: str
    title: str
    source: str
    quote: str
    support: float = Field(
        1.0, description="How well the cited abstract backs the claims citing it (0-1: best sentence similarity of "
        "the weakest claim); below the support threshold the claim is flagged."
    )


class Answer(BaseModel):
    """A composed answer; `to_json` is the public `rag-bot ask --json` contract."""

    question: str
    mode: Mode
    answer: str
    grounded: bool
    citations: list[Citation]
    retrieved: list[dict[str, float | str]]
    llm: str = "offline"
    timings_ms: dict[str, float] = Field(default_factory=dict)
    notice: str | None = Field(None, description="A one-line notice to show (not part of the JSON).")

    def to_json(self) -> dict[str, object]:
        """The stable JSON contract."""
        return self.model_dump(
            include={"question", "mode", "answer", "grounded", "citations", "retrieved", "llm", "timings_ms"}
        )


class Turn(BaseModel):
    """One earlier exchange of a conversation."""

    question: str
    answer: Answer | None = None


def final_answer(events: Iterable[str | Answer]) -> Answer:
    """The `Answer` that ends an answer stream (text deltas are dropped)."""
    answer: Answer | None = None
    for event in events:
        if isinstance(event, Answer):
            answer = event
    if answer is None:
        raise RuntimeError("the answer stream ended without an Answer")
    return answer
