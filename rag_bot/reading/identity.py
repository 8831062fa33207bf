"""Which records are one paper: identifiers (DOI, arXiv id, OpenReview id, Semantic Scholar id) in one spelling,
the keys a paper is known by, and the merge that keeps one record with the richer metadata.

The readers fill `Paper.identifiers` with `doi`, `arxiv`, `openreview` and `s2` in the spellings below; the store
(rag_bot/store/index.py) recognises a paper arriving again under another id by any shared key and keeps the first
arrival's id and text, adding what the newcomer knows (`merge`), but only when the two texts agree
(`same_text`): a record that shares a title or a DOI with a stored paper but holds another text is kept apart, so a
planted record can neither absorb the real paper nor add its links to it. A normalised title is a key only for a title a
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
# pair of different papers sharing a title has three words (bench/fit/identity_titles.py).
MIN_TITLE_WORDS = 4
# Two records that share a key are one paper only when their abstracts' word sets overlap (Jaccard) at least this
# much. bench/fit/identity_texts.py on the 22,148 real abstracts: the 20 same-paper pairs (a shared title of four or
# more words) overlap 0.53-1.0 (median 0.81); 200,000 random pairs of different papers at most 0.29; each abstract's
# nearest abstract under another title overlaps 0.21 at the median and 0.31 at the 99th percentile, and 19 of those
# 19,486 pairs reach 0.5, most of them one paper retitled or revised (wsnet 0.96, dropmax 0.86), the lowest two
# different papers of one group (0.52). A wrong merge loses an abstract, a wrong split only keeps a duplicate: the
# cut sits just under the lowest same-paper pair.
SAME_TEXT_OVERLAP = 0.5
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


def text_words(text: str) -> set[str]:
    """The distinct words of a text, case-folded, markup dropped: what `text_overlap` compares."""
    return set(_WORD.findall(clean_markup(text).casefold()))


def text_overlap(a: str, b: str) -> float:
    """How much two texts share: the Jaccard overlap of their word sets (0 to 1)."""
    first, second = text_words(a), text_words(b)
    return len(first & second) / max(len(first | second), 1)


def same_text(a: str, b: str) -> bool:
    """Whether two records' abstracts are one paper's (the same text, or two versions of it): `SAME_TEXT_OVERLAP`."""
    return text_overlap(a, b) >= SAME_TEXT_OVERLAP


def merge(kept: Paper, other: Paper) -> Paper:
    """`kept` with what `other` adds: identifiers it lacks, and venue, year, URL and authors where it has none
    (its id, title and text stay: the first arrival's citations and vectors remain valid). Only for records of one
    paper: the store checks `same_text` first."""
    update: dict[str, object] = {"identifiers": {**other.identifiers, **kept.identifiers}}
    for field in ("venue", "year", "url"):
        if getattr(kept, field) in (None, "") and getattr(other, field) not in (None, ""):
            update[field] = getattr(other, field)
    if not kept.authors and other.authors:
        update["authors"] = list(other.authors)
    if other.url and other.url not in kept.links:
        update["links"] = [*kept.links, other.url]
    return kept.model_copy(update=update)
