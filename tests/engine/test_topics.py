"""An honest answer's words (issue 37, item 6): a refusal, or the sentence saying what the collection lacks, names the
question's topic in the question's words and none of the words the question was asked with."""

from __future__ import annotations

import re

import pytest

from rag_bot import answer_words

# How a newcomer asks: polite, roundabout, about papers or work or research, as a request or a question.
FRAMES = [
    "Are there papers that use {}?",
    "Can you recommend a paper about {}?",
    "What machine learning work exists on {}?",
    "Which papers study {}?",
    "I'd like to know about {}.",
    "Is there any research on {}?",
    "Do you know of work on {}?",
    "I'm looking for papers about {}",
    "Could you point me to research on {}?",
    "Tell me about {}",
    "Anything on {}?",
    "What does the collection say about {}?",
    "Please find papers on {}.",
    "Show me work about {}",
    "What is known about {}?",
    "Any papers on {} that you can recommend?",
    "I want to read about {}",
    "What has been published on {}?",
    "Do any of these papers discuss {}?",
    "Has anyone studied {}?",
    "Is there something on {}?",
    "Is anyone working on {}?",
    "What can you tell me about {}?",
]
# Topics none of the seeds' 38 abstracts is about (they are on language models), each one concept.
ABSENT = ["baking bread", "coral reef bleaching", "medieval tax records", "wind turbine maintenance",
          "sourdough fermentation", "volcanic ash dispersion", "tomato plant pruning", "predicting wine quality",
          "honey bee colony collapse", "ancient pottery dating"]
# The two refusals: one topic declined, or a join of concepts none of which the collection holds.
# The refusals' templates (rag_bot/answer_words.py) as patterns capturing the topic they quote.
QUOTED = re.compile(re.escape(answer_words.NOT_COVERED.split("{what}")[0]) + "\u201c(.*?)\u201d|^"
                    + re.escape(answer_words.LACKS_ALL.split("{lacking}")[0]) + r"(.*?)\.(?: |$)")


def words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[\w']+", text)}


def refusal_problem(engine, frame: str, topic: str) -> str:
    """What is wrong with the answer to the frame asked about the topic ("" when it is a refusal quoting the topic
    and none of the frame's own words)."""
    answer = engine.ask(frame.format(topic))
    if answer.certainty == "tentative":
        return ""  # shown as the closest papers, for the reader to judge: no claim, and nothing quoted (counted below)
    if answer.grounded or answer.citations:
        return "answered, not refused"
    quoted = QUOTED.search(answer.answer)
    if not quoted:
        # A phrase measured as not the question's subject is not quoted (compose.QUOTED_TOPIC_COSINE): "this".
        return "" if answer.answer.startswith(UNQUOTED) else f"no quoted topic in {answer.answer!r}"
    said = quoted.group(1) or quoted.group(2)
    if said != topic:
        return f"quoted {said!r}"
    leftover = words(said) & (words(frame) - words(topic))
    return f"the frame's words {sorted(leftover)} quoted" if leftover else ""


# Every frame with two topics, every topic with three or four frames, the same ones every run: 38 offline refusals
# take 2 s (load 5 on 2 cores), where hypothesis's random 10 of the 190 passed or failed by chance and shrinking a
# failure took 37 s. All 190 take 12 s there.
PAIRS = [(frame, ABSENT[(2 * n + k) % len(ABSENT)]) for n, frame in enumerate(FRAMES) for k in (0, 1)]


UNQUOTED = answer_words.NOT_COVERED.format(what=answer_words.NOT_COVERED_THIS).split(":")[0] + ":"


def test_a_refusal_quotes_the_topic_and_none_of_the_words_it_was_asked_with(engine):
    wrong = [f"{frame.format(topic)!r}: {problem}" for frame, topic in PAIRS
             if (problem := refusal_problem(engine, frame, topic))]
    assert not wrong, f"{len(wrong)} of {len(PAIRS)}:\n" + "\n".join(wrong)
    # Most say which topic: the quoting cut keeps 0.82 of the phrases readers judged right (docs/eval.md); these
    # short frames lose one of 46 ("What machine learning work exists on sourdough fermentation?").
    unquoted = [frame.format(topic) for frame, topic in PAIRS
                if engine.ask(frame.format(topic)).answer.startswith(UNQUOTED)]
    assert len(unquoted) <= len(PAIRS) // 10, unquoted
    # No paper is about these topics: nearly all are refused, not shown tentatively (the certainty's cut at the seeds'
    # size lets through the evidence of 2 % of the answerable questions, bench/fit/certainty.py).
    tentative = [frame.format(topic) for frame, topic in PAIRS if engine.ask(frame.format(topic)).certainty != "none"]
    assert len(tentative) <= len(PAIRS) // 10, tentative


@pytest.mark.parametrize(
    ("question", "says", "leftover"),
    [
        ("Are there papers that use graph neural networks to evaluate chess positions?",
         ("graph neural networks", "chess positions"), ("there", "use")),
        ("What machine learning work exists on forecasting earthquakes?",
         ("forecasting earthquakes",), ("What", "work", "exists")),
        ("Has federated learning been applied to tomato plant pruning in any of these papers?",
         ("federated learning", "tomato plant pruning"), ("Has", "these papers")),
        ("Which papers combine quantum annealing with sea ice forecasting?",
         ("quantum annealing", "sea ice forecasting"), ("Which", "papers")),
        ("Is anyone using quantum annealing for sea ice forecasting?",
         ("quantum annealing", "sea ice forecasting"), ("anyone", "using")),
        ("Has anyone studied federated learning for tomato plant pruning?",
         ("federated learning", "tomato plant pruning"), ("anyone", "studied")),
    ],
)
def test_what_is_missing_is_said_in_the_topics_words(engine, question, says, leftover):
    first = engine.ask(question).answer.split("\n")[0].split(answer_words.NEAREST_TOPICS.split("{titles}")[0])[0]
    assert first.startswith(answer_words.MISSING_OPENINGS), first
    for phrase in says:
        assert phrase in first, first
    for word in leftover:
        assert not re.search(rf"\b{re.escape(word)}\b", first), f"{word!r} left in: {first}"

