"""Which records are one paper: identifiers (DOI, arXiv id, OpenReview id, Semantic Scholar id) in one spelling,
the keys a paper is known by, and the merge that keeps one record with the richer metadata.

The readers fill `Paper.identifiers` with `doi`, `arxiv`, `openreview` and `s2` in the spellings below; the store
(rag_bot/store/index.py) recognises a paper arriving again under another id by any shared key and keeps the first
arrival's id and text, adding what the newcomer knows (`merge`). A normalised title is a key only for a title a
record gives (a seed file's titles are derived from the text) of at least `MIN_TITLE_WORDS` words: "Introduction"
or "Deep Learning" name many papers.
"""

from __future__ import annotations

import re
import unicodedata

from rag_bot.text import clean_markup
from rag_bot.types import Paper

KINDS = ("doi", "arxiv", "openreview", "s2")
# Four words: among the 22,148 real abstracts (../shared/data), 20 pairs share a title of four or more words and
# every one is the same paper twice (abstract word overlap 0.53-1.0, a workshop and a conference version); the one
# pair of different papers sharing a title has three words (bench/identity_titles.py).
MIN_TITLE_WORDS = 4
_DOI = re.compile(r"10\.\d{4,9}/\S+")
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
_ARXIV_NEW = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(?:v\d+)?(?![\d])")
_ARXIV_OLD = re.compile(r"\b([a-z][a-z.-]+/\d{7})(?:v\d+)?\b", re.IGNORECASE)
_ARXIV_DOI = re.compile(r"^10\.48550/arxiv\.(.+)$", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")


def doi(value: object) -> str | None:
    """A DOI in its canonical spelling (lower case, no resolver prefix), or None."""
    text = _DOI_PREFIX.sub("", " ".join(str(value or "").split()))
    match = _DOI.search(text)
    return match.group(0).rstrip(".,;").lower() if match else None


def arxiv_id(value: object) -> str | None:
    """An arXiv identifier without its version ("2101.00001", "hep-th/9901001"), from an id, an abs/pdf URL, an
    "arXiv:" citation or arXiv's DOI; or None."""
    text = " ".join(str(value or "").split())
    if (found := doi(text)) and (match := _ARXIV_DOI.match(found)):
        text = match.group(1)
    match = _ARXIV_NEW.search(text) or _ARXIV_OLD.search(text)
    return match.group(1).lower() if match else None


def title_key(title: str) -> str | None:
    """A title as a key: its words, case-folded, accents and markup dropped; None when too short to name one
    paper."""
    plain = unicodedata.normalize("NFKD", clean_markup(title)).encode("ascii", "ignore").decode()
    words = _WORD.findall(plain.casefold())
    return " ".join(words) if len(words) >= MIN_TITLE_WORDS else None


def keys(paper: Paper) -> list[str]:
    """The keys that name this paper: its identifiers, and its title when a record gave it."""
    return keys_of(paper.title, paper.source, paper.identifiers)


def keys_of(title: str, source: str, identifiers: dict[str, str]) -> list[str]:
    """`keys` from a paper's stored fields (the store reads them without building the paper)."""
    found = [f"{kind}:{value}" for kind, value in sorted(identifiers.items()) if value]
    if not source.lower().endswith(".txt") and (key := title_key(title)):
        found.append(f"title:{key}")
    return found


def merge(kept: Paper, other: Paper) -> Paper:
    """`kept` with what `other` adds: identifiers it lacks, and venue, year, URL and authors where it has none
    (its id, title and text stay: the first arrival's citations and vectors remain valid)."""
    update: dict[str, object] = {"identifiers": {**other.identifiers, **kept.identifiers}}
    for field in ("venue", "year", "url"):
        if getattr(kept, field) in (None, "") and getattr(other, field) not in (None, ""):
            update[field] = getattr(other, field)
    if not kept.authors and other.authors:
        update["authors"] = list(other.authors)
    if other.url and other.url not in kept.links:
        update["links"] = [*kept.links, other.url]
    return kept.model_copy(update=update)
