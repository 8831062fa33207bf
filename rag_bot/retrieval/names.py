"""The names papers go by, and which papers a question names.

A collection labels itself: a paper's name is what its title starts with ("RULER: What's the Real Context Size of
Your Long-Context Language Models?" -> RULER) or what its abstract introduces ("we propose CorrSteer", read at
ingest into `Paper.aliases`: rag_bot/text.py). `name_table` keys every such name by its normalised form; it is
built once with the lexicon (rag_bot/retrieval/lexical/) and saved with it, so a question looks its words up in a
dictionary, never scans the papers. `NameIndex.find` says which papers a question names.

A name that is also an ordinary word of the collection (MENTOR, SteP, Most: abstracts other than the papers it
names use the word) counts only when the question writes it as the name is written (MENTOR, not "mentor"), and a
capitalised plain word (Most, Masking) not as the question's first word, where every word is capitalised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rag_bot.text import clean_markup, normalize_name
from rag_bot.topics import topic_query, topic_words
from rag_bot.types import Paper

# A word as names are written: CorrSteer, Het-CPFLoRA, Quartet-II, GPT-4o, C++.
NAME_TOKEN = re.compile(r"[\w][\w\-–.+]*[\w+]|[\w]")
# The words before a title's colon: one token (RULER, R2E-Gym, $χ$SPN), or up to four capitalised words one of
# which is written as a name (Kernel Recursive ABC, Quartet II); "Open Problem" or "Size Matters" name nothing.
_TITLE_HEAD = re.compile(r"^\s*([^\s:]+(?:\s+[^\s:]+){0,3})\s*:\s+\S")
_NAME_WORD = re.compile(r"[A-Za-z]*[a-z0-9][A-Z]|[A-Z]{2,}|\d")
TITLE_NAME_CHARS = 40  # longest title name kept (the longest self-named title's name in the 22,148 records: 25)
LONGEST_NAME_TOKENS = 4  # question words a name may span (title names are at most four words)
# A name held by more than this share of the papers besides its own is a concept of the field (SGD, LLMs, VAE). Set
# by `python -m bench.eval.names_lookup --share ...` on the part not locked: at 22,148 papers 0.0005 / 0.002 / 0.005 / no
# limit named a self-named title's paper first 0.988 / 0.989 / 0.990 / 0.990, both of a pair 0.995 / 0.996 / 0.998 /
# 1.0, and let the 173 judged questions name a paper they are not about 1 / 2 / 5 / 25 times (docs/eval.md).
COMMON_SHARE = 0.002


def title_name(title: str) -> str | None:
    """The name a title gives its paper ("RULER: What's the Real Context Size ..." -> "RULER"), or None."""
    m = _TITLE_HEAD.match(clean_markup(title))
    if not m:
        return None
    words = m.group(1).split()
    name = " ".join(words)
    if len(name) > TITLE_NAME_CHARS or len(normalize_name(name)) < 2 or not re.search(r"[A-Za-z]", name):
        return None
    if len(words) > 1 and not (all(w[0].isupper() or w[0].isdigit() for w in words)
                               and any(_NAME_WORD.search(w) for w in words)):
        return None
    return name


def paper_names(paper: Paper) -> list[str]:
    """The names a paper goes by: its title's, then those its abstract introduces."""
    head = title_name(paper.title)
    return list(dict.fromkeys([head, *paper.aliases] if head else paper.aliases))


def name_table(papers: Iterable[Paper]) -> dict[str, list[tuple[str, str]]]:
    """normalised name -> [(name as written, doc_id)]: the names the papers go by, for lookup (`NameIndex`)."""
    table: dict[str, list[tuple[str, str]]] = {}
    for paper in papers:
        for name in paper_names(paper):
            key = normalize_name(name)
            if len(key) >= 2 and (name, paper.doc_id) not in table.get(key, []):
                table.setdefault(key, []).append((name, paper.doc_id))
    return table


def is_distinctive(name: str) -> bool:
    """Whether a name is one no ordinary text would contain: inner capitals or digits after lower case
    (CorrSteer, DSGym, Quartet II); acronyms such as "LM" or "MST" and capitalised phrases appear in ordinary
    text."""
    return bool(re.search(r"[a-z][A-Z]|[a-z]-?[A-Z0-9]|[A-Z][a-z]+\s+(?:[IVX]+|\d)", name))


def _letters(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "", text)


def _written_as_name(name: str, raw: str, first: bool, ordinary: bool) -> bool:
    """Whether the question's words `raw` ask for `name` as a name (`first`: they open the question)."""
    if ordinary:
        # An ordinary word of the collection names a paper only as the name writes it, and a capitalised plain
        # word (Most, Masking) not where every word is capitalised.
        plain = re.fullmatch(r"[A-Z][a-z]+", _letters(name)) is not None
        return _letters(raw) == _letters(name) and not (plain and first)
    # An all-capitals name that is also a word (ECHO, BRIDGE, CAT, TIE) must be written in capitals;
    # names with inner capitals or digits (CorrSteer, Quartet II) match however they are written.
    letters = re.sub(r"[^A-Za-z]", "", name)
    if letters.isupper() and len(letters) <= 8:
        return _letters(raw) == _letters(name)
    return True


@dataclass(frozen=True)
class Usage:
    """How the collection uses a name's words, from the lexicon's word statistics: whether a name is also an
    ordinary word (more abstracts hold it than the papers it names) or a concept of the field (SGD, LLMs,
    Reinforcement Learning: held by more than COMMON_SHARE of the papers besides those it names)."""

    df: Mapping[str, int]  # stemmed word -> papers holding it
    papers: int  # papers in the collection
    stem: Callable[[str], list[str]]  # a text's stemmed words, as the lexicon stems them

    def _least(self, name: str) -> int | None:
        stems = self.stem(name)  # a name of several words is no more used than its rarest word
        return min(self.df.get(s, 0) for s in stems) if stems else None  # None: stop words only ("Most")

    def ordinary(self, name: str, holders: int) -> bool:
        """Whether abstracts besides the `holders` that go by the name use its word(s), or it is a stop word."""
        least = self._least(name)
        return least is None or least > holders

    def common(self, name: str, holders: int) -> bool:
        """Whether the name is a concept of the field rather than one paper's: it names papers only when the
        question asks for nothing but names ("What is SGD?", not "SGD for sparse models")."""
        least = self._least(name)
        return least is None or least > holders + COMMON_SHARE * self.papers


# Words that join the names a comparison asks about ("RULER vs REBAR", "WATTLE differ from MENTOR").
_JOINING = {"and", "or", "vs", "versus", "from", "with", "to", "between", "against"}


def _asks_about_more(question: str, written: set[str]) -> bool:
    """Whether the question is about more than the names it writes (`written`): its topic, less its request
    (`topic_query`: "Compare", "How does ... differ") and those names, has words left."""
    keys = [normalize_name(name) for name in written]  # a name's parts ("Door" of "Door(s)") are the name
    return any(word.lower() not in _JOINING and not any(normalize_name(word) in key for key in keys)
               for word, _ in topic_words(topic_query(question)))


@dataclass
class NameIndex:
    """The names papers go by, normalised for lookup (`name_table`)."""

    by_key: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # key -> [(name, doc_id)]

    @classmethod
    def build(cls, papers: list[Paper]) -> NameIndex:
        """The name table of a collection."""
        return cls(by_key=name_table(papers))

    def find(self, question: str, distinctive_only: bool = False, usage: Usage | None = None) -> list[str]:
        """doc_ids of papers named in the question, in the order they are named (with `distinctive_only`, only
        names no ordinary text would contain: CorrSteer, Quartet II); with `usage`, a name that is an ordinary word
        only as written, and a concept of the field only in a question of names alone."""
        tokens = NAME_TOKEN.findall(question)
        found: list[tuple[int, str, str, bool]] = []  # (first token, as written, doc_id, common)
        for size in range(LONGEST_NAME_TOKENS, 0, -1):
            for i in range(len(tokens) - size + 1):
                raw = " ".join(tokens[i:i + size])
                entries = self.by_key.get(normalize_name(raw), [])
                if not entries:
                    continue
                holders = len({d for _, d in entries})
                for name, doc_id in entries:
                    if distinctive_only and not is_distinctive(name):
                        continue
                    if _written_as_name(name, raw, i == 0, usage is not None and usage.ordinary(name, holders)):
                        found.append((i, raw, doc_id, usage is not None and usage.common(name, holders)))
        if any(common for *_, common in found) and _asks_about_more(question, {raw for _, raw, _, _ in found}):
            found = [f for f in found if not f[3]]
        first_seen: dict[str, int] = {}  # doc_id -> index of the token where its name starts
        for i, _, doc_id, _ in found:
            first_seen[doc_id] = min(i, first_seen.get(doc_id, i))
        return sorted(first_seen, key=first_seen.__getitem__)
