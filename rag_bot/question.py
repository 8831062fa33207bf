"""The one reader of a question, for every surface and stage: cleaning and its one length limit, the answer mode
it asks for, whether it follows up on the previous turn, and its topic (`topic_query`, from rag_bot.topics)."""

from __future__ import annotations

import re

from rag_bot.errors import EmptyQuestionError, QuestionTooLongError
from rag_bot.topics import topic_query
from rag_bot.types import Mode

__all__ = ["MAX_QUESTION_CHARS", "asks_for_number", "checked_question", "clean_question", "detect_mode",
           "is_follow_up", "topic_query"]

# A pasted abstract fits: 22,146 of the 22,148 abstracts of shared/data/ml_abstracts.jsonl.gz are at most 4,000
# characters once their whitespace is collapsed (99.5 % at most 2,000, the chat's old limit). Longer text only
# slows every stage down. Counted after cleaning, so line breaks in a pasted text do not count against it.
MAX_QUESTION_CHARS = 4000

# Terminal escape sequences (a pasted coloured log) and C0/C1 control characters: shown as nothing, they become a
# space so the words on either side stay apart.
_UNPRINTABLE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Characters that show nothing: format characters (zero-width space and joiners, the byte-order mark, bidi
# controls, soft hyphen, the Mongolian vowel separator, tags), the combining grapheme joiner, variation selectors,
# Hangul fillers and the blank Braille pattern. A question of only these is empty; inside a word they would split
# its match.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
                        "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e007f]")


def clean_question(question: str | None) -> str:
    """A question as the stages take it: one line of printable text, lone surrogates (from undecodable bytes)
    replaced; not yet checked against the limit (`checked_question`)."""
    text = (question or "").encode("utf-8", "replace").decode("utf-8")
    text = _INVISIBLE.sub("", _UNPRINTABLE.sub(" ", text))
    return " ".join(text.split())


def checked_question(question: str | None) -> str:
    """The cleaned question, or `EmptyQuestionError` / `QuestionTooLongError` with the one line every surface
    shows."""
    text = clean_question(question)
    if not text:
        raise EmptyQuestionError("the question is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise QuestionTooLongError(f"the question is too long ({len(text):,} characters; the limit is "
                                   f"{MAX_QUESTION_CHARS:,}): shorten it, or ask about one part at a time")
    return text


# --- the answer mode a question asks for ------------------------------------------------------------------
_COMPARE = re.compile(
    r"\b(compare|comparison|contrast|versus|vs\.?|differ(?:s|ence|ences)?|similarit(?:y|ies)|"
    r"which is better|how does .+ relate to)\b",
    re.IGNORECASE,
)
_SUMMARY = re.compile(
    r"\b(summari[sz]e|summary|overview|survey|landscape|state of the art on|what (?:is|has) "
    r"(?:the )?(?:work|research)|(?:work|research|papers|studies) (?:on|about)|what are the (?:main )?"
    r"(?:approaches|methods|papers|directions)|which papers|list (?:the )?papers)\b",
    re.IGNORECASE,
)
_NUMERIC = re.compile(
    r"\b(how (?:much|many|fast|large|big|well|often|long|small)|what (?:factor|percentage|fraction|number)|by how|what (?:is|was|are) the (?:gain|speed ?up|accuracy|"
    r"improvement|score|size|reduction|number)|gain|speed ?up|accuracy|percent|improve(?:ment)?|"
    r"reduc\w*|faster|score)\b",
    re.IGNORECASE,
)


def detect_mode(question: str) -> Mode:
    """The answer mode a question asks for: compare, summary, or a direct answer (ask)."""
    if _COMPARE.search(question):
        return "compare"
    if _SUMMARY.search(question):
        return "summary"
    return "ask"


def asks_for_number(question: str) -> bool:
    """Whether the question asks for a figure ("how much faster", "what accuracy"), so the answer should hold one."""
    return bool(_NUMERIC.search(question))


# --- follow-ups ------------------------------------------------------------------------------------------
# A question that opens with a joining word or points back at what the last answer named ("and which of them is
# fastest?") only makes sense with the previous question.
_FOLLOW_UP = re.compile(
    r"^(?:and|but|also|what about|how about|which of (?:them|these|those)|do any|does any|of these|"
    r"among (?:them|these))\b|\b(?:they|them|these|those|it|its|their|each of)\b",
    re.IGNORECASE,
)


def is_follow_up(question: str) -> bool:
    """Whether the question leans on the previous turn ("and which of them is fastest?")."""
    return bool(_FOLLOW_UP.search(question))
