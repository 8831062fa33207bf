"""Naming a map's topics: the words that set a topic's papers apart (TF-IDF over titles and abstracts), two per topic, without stop words, stems said twice or modifiers alone."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from rag_bot.text import clean_markup
from rag_bot.types import Paper

TERM_SAMPLE = 250  # papers per topic whose words name it (evenly spread)

# Words that say nothing about a topic in ML abstracts, on top of English function words.
_STOP = set(
    """a an the of in on for to and or with by from as at is are was were be been being this that these those
    it its their our we they what which who how does do did can could should would may might will about into
    than then there here such more most via each both also only not no but while where when over under
    between across without within through while however thus further first new novel propose proposes
    proposed present presents introduce introduces show shows shown demonstrate demonstrates results result
    approach approaches method methods paper work framework frameworks existing prior recent based using use
    used uses model models learning task tasks data performance state art significantly significant
    experiments experimental extensive achieve achieves achieving improve improves improved improvement
    effective efficient efficiently large problem problems key well specific different various several many
    often even one two three all any other same across strong code available https github com www
    outperforms baselines benchmark benchmarks including include includes address addresses enables enable
    provide provides remain remains however study studies analysis set sets make makes making like lead leads
    high low better best up non typically during among toward towards upon whose consistently reveal reveals revealing largely widely commonly current whether yet still limited lack critical crucial important substantial substantially recently require requires required due level levels range wide given able ability ensure ensures leverage leverages addition additional relative pipeline pipelines""".split()
)


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{2,}")


def _words(paper: Paper) -> set[str]:
    """The paper's topic words: content words, and two-word phrases of content words."""
    text = clean_markup(f"{paper.title}. {paper.text}")
    out: set[str] = set()
    for sentence in re.split(r"[.;:!?()\[\],]", text):
        previous = ""
        for word in _WORD.findall(sentence):
            lower = word.lower()
            if lower in _STOP or lower.endswith("ly"):
                previous = ""
                continue
            # Acronyms keep their case (LLM, RL); other words are lower-cased and lightly de-pluralised.
            if word.isupper() and len(word) <= 6:
                term = word
            elif lower.endswith(("sses", "ices")):  # processes -> process; matrices stays whole
                term = lower[:-2] if lower.endswith("sses") else lower
            elif lower.endswith("s") and not lower.endswith(("ss", "us", "is")) and len(lower) > 4:
                term = lower[:-1]
            else:
                term = lower
            out.add(term)
            if previous:
                out.add(f"{previous} {term}")
            previous = term
    return out


# Compound modifiers ("high-quality", "large-scale", "long-context") describe a topic; they never name one.
_MODIFIER = re.compile(r"^(?:high|low|large|small|long|short|well|wide|fine-grained|real)-")


def _names_a_topic(term: str) -> bool:
    """Whether a term can name a topic: no adverb ("efficiently") and no compound modifier on its own."""
    words = term.split(" ")
    return not any(w.endswith("ly") for w in words) and not (len(words) == 1 and _MODIFIER.match(term))


def cluster_terms(papers: Sequence[Paper], clusters: np.ndarray, n_terms: int = 3) -> list[list[str]]:
    """The terms that set each cluster apart: shared by many of its papers, rare in the rest (TF-IDF-like)."""
    n = len(papers)
    groups = [np.flatnonzero(clusters == j) for j in range(int(clusters.max()) + 1 if n else 0)]
    # Past TERM_SAMPLE papers a topic is read from an evenly spread sample of them (the counts are shares).
    groups = [g if len(g) <= TERM_SAMPLE else g[np.linspace(0, len(g) - 1, TERM_SAMPLE).round().astype(int)]
              for g in groups]
    bags = {int(i): _words(papers[int(i)]) for g in groups for i in g}
    everywhere = Counter(w for bag in bags.values() for w in bag)
    n = len(bags)
    out: list[list[str]] = []
    for idx in groups:
        inside = Counter(w for i in idx for w in bags[int(i)])
        size = len(idx)

        def weight(term: str, inside: Counter[str] = inside, size: int = size) -> float:
            share = inside[term] / size
            # Phrases name topics better than single words ("federated lora" over "federated").
            return share * math.log((n + 1) / everywhere[term]) * (1.3 if " " in term else 1.0)

        # A topic is named by noun phrases: a single word must read as a noun or a name ("quantization", "LLM"),
        # never an adjective or adverb ("high-quality", "efficiently").
        candidates = [w for w, c in inside.items() if c >= min(2, size) and _names_a_topic(w)]
        chosen: list[str] = []
        for term in sorted(candidates, key=lambda w: (-weight(w), w)):
            stems = {w[:5] for w in term.split(" ")}
            # A term that repeats a word of one already chosen, or its stem, adds little ("federated" after
            # "federated lora", "classifier" after "classification").
            if any(stems & {w[:5] for w in c.split(" ")} for c in chosen):
                continue
            chosen.append(term)
            if len(chosen) == n_terms:
                break
        out.append(chosen)
    return out
