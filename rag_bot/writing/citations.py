"""Citations, checked: the `[n]` markers of a written answer (as it streams), the claims each marker ends, and how
well the cited abstract supports each claim. Pure functions over text and vectors."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import numpy as np

from rag_bot.types import Answer, Paper

_MARKER = re.compile(r"\[\s*(\d{1,3}(?:\s*(?:,|;|-|–)\s*\d{1,3})*)\s*\]")
_PARTIAL_MARKER = re.compile(r"\[[\d\s,;\-–]*$")  # the start of a marker that the next delta may complete
CLAIM_MIN_WORDS = 4  # shorter "claims" are headings or titles ("**CorrSteer** [1]:"), not statements
LEXICAL_WEIGHT = 0.5  # support = mix of meaning (best sentence) and words (claim terms found in the abstract)
_HEADING = re.compile(r"\s*(?:[-*]\s+)?\*\*[^*\n]+\*\*\s*")  # a bold heading alone: "- **CorrSteer** "
_HEADING_END = re.compile(r"(?:\s*\[\d+\])*\s*:")  # what follows a cited heading: more markers, then ":"
_LEADING_HEADING = re.compile(r"^\s*(?:[-*]\s+)?\*\*[^*\n]+\*\*(?:\s*\[\d+\])*\s*:\s*")  # "- **X**: claim"
_TERM = re.compile(r"[a-z][a-z0-9\-]{3,}")
_COMMON = set("that this these those with from into their which while have been were also more most such than "
              "each both other over using used based show shows paper papers work method methods model models "
              "approach results propose proposes introduce introduces study studies".split())


def claim_terms(text: str) -> set[str]:
    """The content words of a text, cut to 6 letters (a cheap stem)."""
    return {w[:6] for w in _TERM.findall(text.lower()) if w not in _COMMON}


class CitationChecker:
    """Checks the `[n]` markers of a model's answer as its text streams in (n = 1..`sources`).

    Markers that point to no source are removed (with the space before them) and counted; a marker repeating a
    source just cited is dropped; `[1, 3]` and `[2-4]` become `[1][3]` and `[2][3][4]`; the sources are renumbered
    by first use, so the text comes out with markers 1..k without gaps. What `feed` returns is final: a marker split
    across deltas is held back until it is complete.
    """

    def __init__(self, sources: int) -> None:
        self.sources = sources
        self.order: list[int] = []  # the model's source numbers, in order of first use
        self.removed = 0  # markers that pointed to no source
        self.duplicates = 0  # markers repeating the source(s) just cited
        self._pending = ""  # raw text not yet checked
        self._space = ""  # whitespace held back: dropped if a removed marker follows it
        self._last: set[int] = set()  # sources cited since the last word of text
        self._dropped = ""  # the space that stood before a removed marker
        self._out: list[str] = []

    @property
    def text(self) -> str:
        """The checked text so far."""
        return "".join(self._out).strip()

    def feed(self, delta: str) -> str:
        """Check the next piece of the model's text; returns the checked text that can be shown now."""
        self._pending += delta
        return self._drain(final=False)

    def finish(self) -> str:
        """Check whatever is left at the end of the answer."""
        return self._drain(final=True)

    def _drain(self, final: bool) -> str:
        start = len(self._out)
        while self._pending:
            match = _MARKER.search(self._pending)
            if match:
                self._emit_text(self._pending[: match.start()])
                self._emit_marker(match.group(1))
                self._pending = self._pending[match.end():]
                continue
            partial = _PARTIAL_MARKER.search(self._pending)
            if partial and not final and len(self._pending) - partial.start() < 24:
                self._emit_text(self._pending[: partial.start()])
                self._pending = self._pending[partial.start():]
                break
            self._emit_text(self._pending)
            self._pending = ""
        return "".join(self._out[start:])

    def _emit_text(self, text: str) -> None:
        body = text.rstrip()
        if not body:
            self._space += text
            return
        prefix = self._space
        if not prefix and not (body[0].isspace() or body[0] in ".,;:!?)"):
            prefix = self._dropped  # "A [99]word": keep one space; "A [99]." and "A [99] more" need none
        self._out.append(prefix + body)
        self._space, self._dropped = text[len(body):], ""
        self._last = set()

    def _emit_marker(self, group: str) -> None:
        numbers: list[int] = []
        for part in re.split(r"\s*[,;]\s*", group.strip()):
            ends = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x]
            if len(ends) == 2 and 0 <= ends[1] - ends[0] <= 10:
                numbers.extend(range(ends[0], ends[1] + 1))
            else:
                numbers.extend(ends)
        marks = []
        for k in dict.fromkeys(numbers):
            if not 1 <= k <= self.sources:
                self.removed += 1
            elif k in self._last:
                self.duplicates += 1
            else:
                if k not in self.order:
                    self.order.append(k)
                self._last.add(k)
                marks.append(f"[{self.order.index(k) + 1}]")
        self.duplicates += len(numbers) - len(dict.fromkeys(numbers))
        if marks:
            self._out.append((self._space or self._dropped) + "".join(marks))
            self._space, self._dropped = "", ""
        else:  # the marker goes, and the space before it unless text needs it
            self._dropped = self._dropped or self._space
            self._space = ""


def claims_by_marker(text: str) -> dict[int, list[str]]:
    """For each `[n]` of a checked answer, the claims it ends: the sentence, line or table cell before it.

    A bold heading is not a claim: a cited heading (`**CorrSteer** [1]: ...`) is skipped, and the heading that
    opens a line (`- **CorrSteer**: claim [1]`) is not part of the claim after it."""
    claims: dict[int, list[str]] = {}
    for match in re.finditer(r"\[(\d+)\]", text):
        head = text[: match.start()]
        cut = max(head.rfind("\n"), head.rfind("|"), *(head.rfind(p) for p in (". ", "! ", "? ")))
        if _HEADING.fullmatch(_MARKER.sub("", head[cut + 1:])) and _HEADING_END.match(text, match.end()):
            continue  # "**Title** [1]:" cites the paper a heading names
        claim = _claim(head[cut + 1:])
        if len(claim) < 12 and cut > 0:  # "Claim. [1]": the marker follows the sentence it supports
            earlier = head[:cut]
            cut2 = max(earlier.rfind("\n"), earlier.rfind("|"), *(earlier.rfind(p) for p in (". ", "! ", "? ")))
            claim = _claim(head[cut2 + 1:])
        if claim:
            claims.setdefault(int(match.group(1)), []).append(claim)
    return claims


def _claim(segment: str) -> str:
    """The claim in a piece of answer text: markers, a leading bold heading and list or table marks removed."""
    return _LEADING_HEADING.sub("", _MARKER.sub("", segment)).strip(" *-:|")


def support_scores(
    answer: Answer,
    papers: Mapping[str, Paper],
    sentences_of: Callable[[Paper], tuple[list[str], np.ndarray]],
    embed: Callable[[list[str]], np.ndarray],
) -> dict[int, float]:
    """For each citation number, how well the cited abstract backs the claims citing it: for every claim, the mean
    of its best cosine similarity to one of the abstract's sentences and the share of its content words the abstract
    holds; the weakest claim counts; clipped to 0..1 (1.0 when no claim of CLAIM_MIN_WORDS words cites it)."""
    claims = {n: [c for c in found if len(c.split()) >= CLAIM_MIN_WORDS]
              for n, found in claims_by_marker(answer.answer).items()}
    # A claim that is a sentence of a cited abstract (as the offline writer's are: whole, cut with "…", or without
    # a lead-in) reuses
    # that sentence's vector; only the model's own wording is embedded.
    known: dict[str, np.ndarray] = {}
    for citation in answer.citations:
        paper = papers.get(citation.doc_id)
        if paper is not None:
            sentences, sentence_vectors = sentences_of(paper)
            known.update(zip(sentences, sentence_vectors))
    texts = sorted({c for found in claims.values() for c in found})
    vectors: dict[str, np.ndarray] = {c: known[c] for c in texts if c in known}
    for claim in texts:
        if claim in vectors:
            continue
        # Cut with "…", or a sentence without its lead-in ("However, we find …" quoted as "We find …").
        part = claim[:-1].rstrip() if claim.endswith("…") else claim
        lowered = part[:1].lower() + part[1:]
        whole = next((s for s in known if part in s or lowered in s), None)
        if whole is not None:
            vectors[claim] = known[whole]
    rest = [c for c in texts if c not in vectors]
    if rest:
        vectors.update(zip(rest, embed(rest)))
    scores: dict[int, float] = {}
    for citation in answer.citations:
        paper = papers.get(citation.doc_id)
        mine = claims.get(citation.n, [])
        if paper is None or not mine:
            scores[citation.n] = 1.0
            continue
        abstract_sentences, sentence_vectors = sentences_of(paper)
        words = claim_terms(" ".join(abstract_sentences) + " " + paper.title)
        best = []
        for claim in mine:
            meaning = float((sentence_vectors @ vectors[claim]).max())
            terms = claim_terms(claim)
            lexical = len(terms & words) / len(terms) if terms else meaning
            best.append((1 - LEXICAL_WEIGHT) * meaning + LEXICAL_WEIGHT * lexical)
        scores[citation.n] = round(min(max(min(best), 0.0), 1.0), 3)
    return scores
