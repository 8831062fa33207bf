"""The shared data model: what every surface (CLI JSON, chat, tests) speaks."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from pydantic import BaseModel, Field

Mode = Literal["ask", "summary", "compare"]
# How sure an answer is that the collection answers its question (grounding's fitted cuts on the best candidate's
# probability): "confident", the collection answers it; "tentative", the closest papers may; "none", nothing is
# close. `grounded` (the older field) is true for the first two.
Certainty = Literal["confident", "tentative", "none"]
CERTAINTIES: tuple[Certainty, ...] = ("confident", "tentative", "none")


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
    identifiers: dict[str, str] = Field(
        default_factory=dict, description="doi, arxiv, openreview, s2: the ids other sources know it by (rag_bot/reading/identity.py).")

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


class Filters(BaseModel):
    """Which papers a question may draw on: venue, years, author and source file (all case-insensitive; venue,
    author and source match a part of the field)."""

    venue: str | None = None
    year_min: int | None = None
    year_max: int | None = None
    author: str | None = None
    source: str | None = None

    @classmethod
    def parse(cls, venue: str | None = None, year: str | int | None = None, author: str | None = None,
              source: str | None = None) -> Filters | None:
        """Filters from user input (`year` "2025", "2024-2026", "2024-" or "-2023"); None when nothing is set.
        Raises ValueError with the reason for a year that is not one."""
        year_min = year_max = None
        if year is not None and str(year).strip():
            text = str(year).strip().replace("–", "-")
            low, dash, high = (part.strip() for part in text.partition("-"))
            # Four digits each side: "1" (JSON true read as a number), "-5" or "20266" match no paper silently.
            if not all(len(part) == 4 and part.isascii() and part.isdigit() for part in (low, high) if part) or \
                    (not low and not high):
                raise ValueError(f"year must be YYYY or YYYY-YYYY, got {year!r}")
            year_min = int(low) if low else None
            year_max = (int(high) if high else None) if dash else year_min
            if year_min is not None and year_max is not None and year_min > year_max:
                raise ValueError(f"the year range {year!r} is empty")
        clean = {k: (v.strip() or None) if isinstance(v, str) else v
                 for k, v in dict(venue=venue, author=author, source=source).items()}
        filters = cls(year_min=year_min, year_max=year_max, **clean)
        return None if filters.empty else filters

    @property
    def empty(self) -> bool:
        """Whether no filter is set."""
        return not any(v is not None for v in self.model_dump().values())

    def matches(self, paper: Paper) -> bool:
        """Whether a paper passes every filter set."""
        if self.venue and self.venue.lower() not in (paper.venue or "").lower():
            return False
        if self.year_min is not None and (paper.year is None or paper.year < self.year_min):
            return False
        if self.year_max is not None and (paper.year is None or paper.year > self.year_max):
            return False
        if self.author and not any(self.author.lower() in a.lower() for a in paper.authors):
            return False
        return not (self.source and self.source.lower() not in paper.source.lower())

    def describe(self) -> str:
        """The filters in words: "venue ICML, years 2025–2026"."""
        parts = []
        if self.venue:
            parts.append(f"venue {self.venue}")
        if self.year_min is not None or self.year_max is not None:
            if self.year_min == self.year_max:
                parts.append(f"year {self.year_min}")
            else:
                parts.append(f"years {self.year_min or '…'}–{self.year_max or '…'}")
        if self.author:
            parts.append(f"author {self.author}")
        if self.source:
            parts.append(f"source {self.source}")
        return ", ".join(parts)


class ScoredPaper(BaseModel):
    """A paper ranked for a question."""

    paper: Paper
    score: float = Field(description="Fused ranking score (higher is better).")
    similarity: float = Field(description="Best dense cosine similarity of its chunks to the question.")
    named: bool = Field(False, description="The question names this paper.")
    coverage: float = Field(
        0.0, description="Share of the question's content words (IDF-weighted, stemmed) found in the paper."
    )


@dataclass(frozen=True)
class Missing:
    """What the collection lacks of a question that joins concepts ("X for Y"), in the question's own phrases:
    the parts no paper covers and the parts some paper does. Neither held: nothing the question asks about is
    covered; none lacking: each part is covered, but no paper combines them. Writing says it in words."""

    lacking: tuple[str, ...] = ()
    held: tuple[str, ...] = ()


@dataclass(frozen=True)
class Grounding:
    """Grounding's decision, returned to the engine and handed by it to the writer: how sure it is that the
    collection answers the question (`certainty`), from which papers (in the order they are cited), which more may be
    related (a summary's), and what it lacks of the question."""

    certainty: Certainty
    evidence: float  # the best paper's probability of belonging to the answer (the answer's confidence)
    # Confident: the papers the answer is written from. Tentative: the closest papers, shown as such. None: the
    # closest paper on each part of a two-topic question the collection holds, or nothing.
    sources: list[ScoredPaper] = field(default_factory=list)
    related: list[ScoredPaper] = field(default_factory=list)  # a summary's papers that may be related, listed last
    missing: Missing | None = None
    # The candidates it weighed and their probability (1 for a paper the question names), most probable first: the
    # ranking an answer reports (its `retrieved`, scored by that probability) and the nearest papers of a refusal.
    ranking: list[tuple[str, float]] = field(default_factory=list)

    @property
    def grounded(self) -> bool:
        """The older, two-valued field: the collection may answer the question (confident or tentative), or, with
        nothing close, cites the closest paper on each part of a two-topic question it holds."""
        return self.certainty != "none" or bool(self.sources)

    def probability(self, doc_id: str) -> float | None:
        """A candidate's probability of belonging to the answer (1 for a paper the question names), None for a
        paper it did not weigh."""
        return next((p for d, p in self.ranking if d == doc_id), None)


DECLINED = Grounding(certainty="none", evidence=0.0)  # no grounding ran, or nothing was retrieved


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
    probability: float | None = Field(
        None, description="Grounding's probability that this paper belongs to the answer (0-1; 1 for a paper the "
        "question names); None when grounding did not weigh it.")
    related: bool = Field(False, description="Listed as possibly related (a summary's papers below the close ones).")


class Answer(BaseModel):
    """A composed answer; `to_json` is the public `rag-bot ask --json` contract."""

    question: str
    mode: Mode
    answer: str
    grounded: bool = Field(description="The collection may answer the question (certainty confident or tentative), "
                           "or the answer cites the closest papers on the parts of the question it holds; false for "
                           "a refusal.")
    citations: list[Citation]
    retrieved: list[dict[str, float | str]]
    certainty: Certainty = Field("none", description="confident: the collection answers this; tentative: the "
                                 "closest papers may answer it; none: nothing is close.")
    searched_for: str | None = Field(None, description="The question as searched, when its spelling was corrected.")
    llm: str = "offline"
    timings_ms: dict[str, float] = Field(default_factory=dict)
    notice: str | None = Field(None, description="A one-line notice to show (not part of the JSON).")
    filters: Filters | None = Field(None, description="The filters the answer was limited to, if any.")

    def to_json(self) -> dict[str, object]:
        """The stable JSON contract (`filters` only when the question was filtered)."""
        include = {"question", "mode", "answer", "grounded", "certainty", "citations", "retrieved", "llm",
                   "timings_ms", "searched_for"}
        if self.filters is not None:
            include.add("filters")
        return self.model_dump(include=include, exclude_none=False)


class Stats(TypedDict):
    """Size and location of the index (`Engine.stats`, `rag-bot stats --json`)."""

    papers: int
    chunks: int
    store: str
    embedding: str  # the model that made the vectors, whatever the settings
    sources: dict[str, int]  # papers by source file
    sentence_vectors: int  # papers no answer has to embed


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
