"""Every sentence rag-bot's own writing puts in an answer, as named templates (the words to the model are in
rag_bot/prompts.py). Tests and benchmarks import these names, or read the answer's typed fields (its `certainty`, its
citations' `probability`), and never re-type the prose.

What each claims is bounded by grounding's certainty (rag_bot/grounding/decide.py):
- confident: the collection answers the question; a summary still never claims its list is complete;
- tentative: the closest papers may answer it, shown with their best-matching sentences for the reader to judge;
- none: nothing is close; only here is "does not cover" said.
"""

from __future__ import annotations

from rag_bot.types import Certainty

# The plain label every surface shows beside an answer (the chat's badge, the CLI's status line), so the certainty
# is read in words, never from a colour alone.
CERTAINTY_LABELS: dict[Certainty, str] = {
    "confident": "the collection answers this",
    "tentative": "the closest papers may answer this; check them",
    "none": "no paper is close",
}

# --- none: nothing is close --------------------------------------------------------------------------------------
NOT_COVERED = ("The collection does not seem to cover {what}: no abstract in it is a close enough match to answer "
               "with a citation.")
NOT_COVERED_THIS = "this"  # {what} when the question's topic cannot be quoted back
NEAREST_TOPICS = " The nearest topics it does cover are {titles}."
NO_PAPER_MATCHES_FILTER = ("No paper in the collection matches {filters}, so there is nothing to answer from (the "
                           "search is not widened to the whole collection).")
# What the collection lacks of a question joining concepts ("X for Y"), each a sentence that opens the answer.
LACKS_ALL = "No paper in the collection covers {lacking}."
LACKS_PART = "No paper in the collection covers {lacking}; the closest papers below are about {held} only."
LACKS_COMBINATION = ("No paper in the collection combines {first} with {rest}; the closest papers below cover one or "
                     "the other.")
# The openings above, for a reader of answers that needs to know whether one states what is missing.
MISSING_OPENINGS = ("No paper in the collection", "The collection does not seem to cover")

# --- tentative: the closest papers, for the reader to judge ------------------------------------------------------
TENTATIVE_LEAD = "The closest match is *{title}* {ref}: {sentence}"
TENTATIVE_OTHERS = "Also close:"
TENTATIVE_OTHER = "- *{title}* {ref}: {sentence}"
TENTATIVE_CHECK = "No abstract says it in your words; check it."

# --- confident --------------------------------------------------------------------------------------------------
OTHER_PAPERS = "Other papers in the collection bear on this:"
# A summary's opening: how many papers match closely and how many more may be related, never a count as complete.
SUMMARY_CLOSE = "{count} {papers} closely"
SUMMARY_RELATED = "; {count} more may be related (listed last, with their probability)"
SUMMARY_ARRANGED = {
    "themes": ", grouped by theme below.",
    "plain": ":",
    "central themes": "; the {central} most central are grouped by theme below, the other {rest} are listed after them.",
    "central plain": "; the {central} most central come first, the other {rest} are listed after them.",
}
ALSO_ON_TOPIC = "**Also on this topic**"
RELATED_HEADING = "**May be related**"
RELATED_LINE = "- {title} ({probability:.0%}) {ref}"
MAY_BE_RELATED = "may be related"  # a source card's tag for one of those papers
COMPARE_INTRO = "Side by side, as their abstracts describe them:"
COMPARE_UNNAMED = "The question names fewer than two papers; these {count} papers of the collection are on its topic:"
COMPARE_ONLY_ONE = "Only one paper in the collection is on this, so there is nothing to compare it with. "

# --- around any answer -------------------------------------------------------------------------------------------
FILTER_NOTE = "Searched only the papers matching {filters} ({matching} of {total})."
SEARCHED_FOR = "Searched for: {question}"
WEAK_SUPPORT = "Weakly supported: the abstract cited as {marks} does not clearly back the claim citing it."
WRITER_FAILED = "The language model ({writer}) could not answer: {reason}. This answer is from the offline composer."


def certainty_line(certainty: Certainty) -> str:
    """The certainty in words, as the CLI prints it: "Certainty: tentative (the closest papers may …)"."""
    return f"Certainty: {certainty} ({CERTAINTY_LABELS[certainty]})"


def certainty_label(certainty: Certainty) -> str:
    """The certainty as the chat's label by the answer: "Tentative: the closest papers may answer this; …"."""
    return f"{certainty.capitalize()}: {CERTAINTY_LABELS[certainty]}"


def probability_text(probability: float | None) -> str:
    """A source's probability as shown beside it ("probability 0.74"), empty when grounding did not weigh it."""
    return "" if probability is None else f"probability {probability:.2f}"


def summary_opening(close: int, related: int, arrangement: str, central: int = 0, rest: int = 0) -> str:
    """A summary's first sentence: "5 papers match closely; 3 more may be related …, grouped by theme below."."""
    text = SUMMARY_CLOSE.format(count=close, papers="papers match" if close != 1 else "paper matches")
    if related:
        text += SUMMARY_RELATED.format(count=related)
    return text + SUMMARY_ARRANGED[arrangement].format(central=central, rest=rest)


def states_missing(answer_text: str) -> bool:
    """Whether an answer opens by saying what the collection lacks (one of `MISSING_OPENINGS`), after any filter
    note or spelling line."""
    lines = [line for line in answer_text.split("\n") if line.strip() and not line.startswith("_")]
    return bool(lines) and lines[0].startswith(MISSING_OPENINGS)
