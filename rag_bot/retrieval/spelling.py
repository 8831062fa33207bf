"""Questions read as people type them: a misspelt word corrected against the collection's own words.

A word of the question is corrected only when neither the collection nor English knows it (English: the word list
symspellpy ships, `frequency_dictionary_en_82_765.txt`, read for membership only), so a topic the collection lacks
("baking bread") is never turned into one it holds. Its correction is the collection's word nearest to it by
optimal-string-alignment distance (rapidfuzz: a swap of two letters is one edit), at most `MAX_EDITS` for its
length, the most frequent one on a tie, written as the papers write it ("corsteer" -> "CorrSteer"). The words as
written are counted when the lexicon is built (`SpellingCounts`, saved as `spelling.json` beside it) and loaded
with it (`Spelling`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

FILE = "spelling.json"
_WORD = re.compile(r"[A-Za-z][A-Za-z]+")
MIN_LENGTH = 4  # shorter words are too often another real word one edit away ("lora" / "lore")


def max_edits(word: str) -> int:
    """How far a word may be from its correction: one edit up to seven letters, two from eight ("speculatve" is
    one; "reinforcment lerning" one each)."""
    return 1 if len(word) < 8 else 2


@lru_cache(maxsize=1)
def english() -> frozenset[str]:
    """The English words symspellpy ships (82,765, lower case), read once."""
    text = (resources.files("symspellpy") / "frequency_dictionary_en_82_765.txt").read_text(encoding="utf-8")
    return frozenset(line.split(" ", 1)[0] for line in text.splitlines() if line)


class SpellingCounts:
    """The words of the papers as a lexicon build reads them: how many times each (lower case) occurs, and the
    form a paper writes it in when that has capitals (a name's: "CorrSteer")."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.forms: dict[str, str] = {}

    def add(self, texts: Iterable[str]) -> None:
        """Count the words of these texts (titles, aliases and abstracts)."""
        for text in texts:
            for word in _WORD.findall(text):
                if len(word) < MIN_LENGTH:
                    continue
                lower = word.lower()
                self.counts[lower] += 1
                if lower != word and lower not in self.forms and not word.isupper() and not word.istitle():
                    self.forms[lower] = word

    def save(self, folder: Path) -> None:
        """Write `spelling.json` into a lexicon's folder."""
        words = sorted(self.counts)
        (folder / FILE).write_text(json.dumps({"words": words, "counts": [self.counts[w] for w in words],
                                               "forms": self.forms}, ensure_ascii=False), encoding="utf-8")


@dataclass(frozen=True)
class Correction:
    """A question with its misspelt words corrected: the corrected text and each (typed, corrected) pair."""

    text: str
    changes: tuple[tuple[str, str], ...] = ()


@dataclass
class Spelling:
    """The collection's words, for correcting a question's spelling (`correct`)."""

    words: list[str] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    forms: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._known = set(self.words)
        self._count = dict(zip(self.words, self.counts))

    @classmethod
    def load(cls, folder: Path) -> Spelling | None:
        """The counts a lexicon build saved in `folder`, or None when it has none."""
        path = folder / FILE
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(words=data["words"], counts=data["counts"], forms=data["forms"])

    def known(self, word: str) -> bool:
        """Whether the collection or English has this word (any case)."""
        lower = word.lower()
        return lower in self._known or lower in english()

    def suggestion(self, word: str) -> str | None:
        """The collection's word a misspelt `word` stands for, written as the papers write it; None when the word is
        known, too short, or nothing is near enough."""
        from rapidfuzz import process
        from rapidfuzz.distance import OSA

        if len(word) < MIN_LENGTH or not word.isalpha() or self.known(word):
            return None
        lower, limit = word.lower(), max_edits(word)
        found = process.extract(lower, self.words, scorer=OSA.distance, score_cutoff=limit, limit=20)
        if not found:
            return None
        best = min(distance for _, distance, _ in found)
        choice = max((w for w, distance, _ in found if distance == best), key=lambda w: self._count.get(w, 0))
        form = self.forms.get(choice, choice)
        # Kept in the case the user typed it, unless the papers write it as a name.
        if choice in self.forms:
            return form
        return form.capitalize() if word[:1].isupper() else form

    def correct(self, question: str) -> Correction | None:
        """The question with its misspelt words corrected, or None when none is."""
        changes: list[tuple[str, str]] = []

        def fix(match: re.Match[str]) -> str:
            word = match.group()
            better = self.suggestion(word)
            if better is None:
                return word
            changes.append((word, better))
            return better

        text = _WORD.sub(fix, question)
        return Correction(text=text, changes=tuple(changes)) if changes else None
