"""Themes of a summary: the papers grouped by similarity, each group under a heading that fits every paper in it.

A heading's candidates are the phrases (one or two words) that every paper of the group names in its title or in
what it does (its method and problem sentences, rag_bot/writing/roles.py), not in the benchmarks its results name. Each
candidate gets a probability of fitting the group from a logistic function of its `heading_signals`, fitted by
bench/fit/themes.py on headings that readers judged (bench/data/heading_judgements.jsonl) and loaded by
rag_bot/fitted.py; the likeliest heads the group when it reaches the fitted cut, and the group has no heading
otherwise: no heading rather than a wrong one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_bot import fitted
from rag_bot.store.sentences import SentenceIndex
from rag_bot.text import clean_markup, is_nounish
from rag_bot.types import ScoredPaper
from rag_bot.writing.roles import sentence_roles

MODEL_FILE = Path(__file__).with_name("themes_model.json")
LABEL_CACHE = 2000  # groups of papers whose heading candidates are kept
CANDIDATES = 40  # the phrases most shared in a group that are weighed as its heading
JOIN = 0.45  # average-link similarity of abstracts under which two groups stay apart (measured in docs/eval.md)
SIGNALS = ("single", "name", "head_noun", "head_adjective", "after_noun_acronym", "in_titles", "closest", "weakest",
           "question_word")

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]+")
STOP_WORDS = set(  # function words and the words of a question's request; they never name a theme
    "a an the of in on for to and or with by from as at is are was were be been this that these those "
    "it its their our we they what which who how does do did can could should would about into than "
    "then there here paper papers work collection say says tell me some any between other using use "
    "used based new approach method methods model models also such more most via each both may must "
    "among amongst across along around before after behind beyond despite during except inside near onto "
    "outside over past since through toward towards under unlike until upon within without whose whether".split()
)
# Words every abstract uses; they never name a theme.
_GENERIC = set(
    "propose proposed present introduce show shows shown results result performance existing novel "
    "framework frameworks methods large language llm llms models learning data task tasks however while "
    "achieve achieves significant significantly experiments extensive state-of-the-art art state "
    "improve improves improved improving work recent recently first further including two three "
    "efficient effective effectively different various key critical often remains".split()
)
_ADJECTIVE = re.compile(r"(?:al|ic|ive|ous|ary|ful|less|able|ible|ian|ean|ed)$")


def _heading_word(low: str) -> bool:
    """Whether a lower-cased word can be part of a heading: not a function word, a word of every abstract, or a
    sentence adverb ("accurately")."""
    return len(low) >= 3 and low not in STOP_WORDS and low not in _GENERIC and not low.endswith("ly")


def _is_acronym(word: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Za-z0-9\-]*[A-Z][A-Za-z0-9\-]*s?", word))


def heading_signals(surface: str, key: str, titles: Sequence[str], closeness: np.ndarray, question: str) -> list[float]:
    """The signals of one candidate heading (`SIGNALS`): its shape (one word, a name, a noun or an adjective at
    its end, an acronym after a noun: "Networks GNNs"), the share of the group's titles holding it, how close in
    meaning it is to the group's papers (best and weakest), and whether the question holds it."""
    words = surface.split(" ")
    head = words[-1]
    low_titles = [t.lower() for t in titles]
    return [
        float(len(words) == 1),
        float(any(_is_acronym(w) or re.search(r"\d", w) for w in words)),
        float(is_nounish(head)),
        float(bool(_ADJECTIVE.search(head.lower())) and not _is_acronym(head)),
        float(len(words) > 1 and _is_acronym(head) and not _is_acronym(words[0])),
        sum(key in t or surface.lower() in t for t in low_titles) / max(len(titles), 1),
        float(closeness.max()) if len(closeness) else 0.0,
        float(closeness.min()) if len(closeness) else 0.0,
        float(all(w.lower().rstrip("s") in question.lower() for w in words)),
    ]


@lru_cache(maxsize=2)
def _model(path: Path = MODEL_FILE) -> fitted.Fitted:
    return fitted.load(path, SIGNALS, ("fits",))


def fit_probability(rows: np.ndarray) -> np.ndarray:
    """The fitted probability that each row of signals is a heading that fits its group."""
    return _model().probabilities(rows, "fits")


class Themes:
    """Groups a summary's papers and heads each group (`group`); the candidates of a group are cached, since every
    question on a topic groups the same papers again."""

    def __init__(self, sentences: SentenceIndex) -> None:
        self.sentences = sentences
        self._candidates: dict[tuple[tuple[str, int], ...], tuple[list[str], list[str], np.ndarray]] = {}

    def group(self, question: str, papers: Sequence[ScoredPaper]) -> list[tuple[str, list[ScoredPaper]]]:
        """Papers grouped by similarity of their abstracts, each group under its heading; single papers and groups
        without one come last, as "Other related work" (no heading at all when no group has one)."""
        if len(papers) <= 2:
            return [(self.heading(question, papers), list(papers))]
        vectors = np.stack([self.sentences.of(p.paper)[1].mean(axis=0) for p in papers])
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        sims = vectors @ vectors.T
        groups: list[list[int]] = [[i] for i in range(len(papers))]
        while len(groups) > 1:  # average-link agglomerative clustering
            best, pair = -1.0, (0, 0)
            for a in range(len(groups)):
                for b in range(a + 1, len(groups)):
                    s = float(np.mean([sims[i, j] for i in groups[a] for j in groups[b]]))
                    if s > best:
                        best, pair = s, (a, b)
            if best < JOIN:
                break
            a, b = pair
            groups[a] = groups[a] + groups.pop(b)
        groups.sort(key=lambda g: min(g))
        out, rest = [], []
        for g in groups:
            label = self.heading(question, [papers[i] for i in g]) if len(g) > 1 else ""
            if label:
                out.append((label, [papers[i] for i in g]))
            else:  # a single paper, or a group whose papers share no heading
                rest += g
        if rest:
            rest.sort()
            label = "Other related work" if out else self.heading(question, [papers[i] for i in rest])
            out.append((label, [papers[i] for i in rest]))
        return out

    def heading(self, question: str, members: Sequence[ScoredPaper]) -> str:
        """The likeliest fitting heading of a group, "" when none reaches the fitted cut."""
        keys, surfaces, closeness = self.candidates(members)
        if not keys:
            return ""
        titles = [clean_markup(p.paper.title) for p in members]
        rows = np.array([heading_signals(s, k, titles, c, question) for k, s, c in zip(keys, surfaces, closeness)])
        p = fit_probability(rows)
        best = int(np.argmax(p))
        if p[best] < _model().cut("fits", "heading"):
            return ""
        label = surfaces[best]
        return label[0].upper() + label[1:]

    def candidates(self, members: Sequence[ScoredPaper]) -> tuple[list[str], list[str], np.ndarray]:
        """(keys, surfaces, closeness of each to each paper) of the phrases every paper of the group names."""
        group = tuple((p.paper.doc_id, hash(p.paper.text)) for p in members)
        cached = self._candidates.get(group)
        if cached is None:
            cached = self._find(members)
            if len(self._candidates) >= LABEL_CACHE:
                self._candidates.clear()
            self._candidates[group] = cached
        return cached

    def _find(self, members: Sequence[ScoredPaper]) -> tuple[list[str], list[str], np.ndarray]:
        inside: Counter[str] = Counter()
        surface: dict[str, str] = {}
        for paper in members:
            for key, text in self._phrases(paper).items():
                inside[key] += 1
                surface.setdefault(key, text)
        keys = [k for k in sorted(inside, key=lambda k: (-inside[k], k)) if inside[k] == len(members)][:CANDIDATES]
        if not keys:
            return [], [], np.zeros((0, len(members)))
        papers = np.stack([self.sentences.of(p.paper)[1].mean(axis=0) for p in members])
        papers /= np.maximum(np.linalg.norm(papers, axis=1, keepdims=True), 1e-9)
        vectors = self.sentences.phrase_vectors([surface[k] for k in keys])
        return keys, [surface[k] for k in keys], vectors @ papers.T

    def _phrases(self, paper: ScoredPaper) -> dict[str, str]:
        """A paper's candidate phrases (key: lower case, plural "s" dropped): from its title and its method and
        problem sentences."""
        texts, vectors = self.sentences.of(paper.paper)
        about = [t for t, r in zip(texts, sentence_roles(vectors)) if r in ("method", "problem")]
        found: dict[str, str] = {}
        for part in [clean_markup(paper.paper.title), *about]:
            for chunk in re.split(r"[.;:!?()\[\],]", part):
                words = _WORD.findall(chunk)
                for i, word in enumerate(words):
                    low = word.lower()
                    if not _heading_word(low):
                        continue
                    found.setdefault(low.rstrip("s"), word)
                    if i + 1 < len(words) and _heading_word(words[i + 1].lower()):
                        found.setdefault(f"{low} {words[i + 1].lower().rstrip('s')}", f"{word} {words[i + 1]}")
        return found
