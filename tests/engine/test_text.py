"""Reading abstract text: markup cleaning, sentence splitting and name normalisation."""

from __future__ import annotations

import pytest

from rag_bot.text import clean_markup, find_links, normalize_name, split_sentences
from tests.conftest import SEEDS


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (r"we propose \textbf{CorrSteer} for steering", "we propose CorrSteer for steering"),
        (r"the \textsc{Quatro} objective", "the Quatro objective"),
        (r"a \textbf{\textsc{Nested}} name", "a Nested name"),
        (r"runs $1.7\times$ faster", "runs 1.7× faster"),
        (r"**S**afe-**A**blated **R**efusal **Steer**ing", "Safe-Ablated Refusal Steering"),
        (r"improves accuracy by 12.5\% on average", "improves accuracy by 12.5% on average"),
        (r"an \emph{unintended} exploration collapse", "an unintended exploration collapse"),
    ],
)
def test_clean_markup_shows_plain_text(raw: str, clean: str) -> None:
    assert clean_markup(raw) == clean


def test_clean_markup_leaves_no_latex_or_markdown_debris() -> None:
    raw = r"We propose **FedRot-LoRA**, a $2\times$ cheaper \textit{federated} method with 3\% error."
    out = clean_markup(raw)
    for debris in ("\\", "$", "**", "{", "}"):
        assert debris not in out
    assert out == "We propose FedRot-LoRA, a 2× cheaper federated method with 3% error."


def test_split_sentences_keeps_abbreviations_inside_sentences() -> None:
    text = (
        "Prior methods, e.g. LoRA and DoRA, use adapters. As shown by Smith et al. (2020), they drift. "
        "We fix this, i.e. We align them. It works!"
    )
    assert split_sentences(text) == [
        "Prior methods, e.g. LoRA and DoRA, use adapters.",
        "As shown by Smith et al. (2020), they drift.",
        "We fix this, i.e. We align them.",
        "It works!",
    ]


def test_split_sentences_splits_ordinary_sentences() -> None:
    assert split_sentences("One result holds. 2 more follow? Yes. ") == ["One result holds.", "2 more follow?", "Yes."]
    assert split_sentences("   ") == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Quartet II", "quartet-2"),
        ("Quartet II", "Quartet 2"),
        ("quartet-2", "Quartet 2"),
        ("Corr Steer", "CorrSteer"),
        ("FedRot-LoRA", "fedrot lora"),
    ],
)
def test_normalize_name_matches_spellings_of_one_name(a: str, b: str) -> None:
    assert normalize_name(a) == normalize_name(b)


def test_normalize_name_keeps_different_names_apart() -> None:
    assert normalize_name("Quartet II") != normalize_name("Quartet III")
    assert normalize_name("CorrSteer") != normalize_name("SARSteer")
    # A leading roman-numeral-looking word is part of the name, not a number.
    assert normalize_name("V-JEPA") == "vjepa"


def test_find_links_strips_trailing_punctuation() -> None:
    text = r"Code is at https://github.com/haoran-zh/FedRot-LoRA. See also \url{https://lems-svd.github.io}."
    assert find_links(text) == ["https://github.com/haoran-zh/FedRot-LoRA", "https://lems-svd.github.io"]


def test_no_seed_title_is_a_cut_off_sentence():

    from rag_bot.reading.corpus import read_paths

    papers = read_paths([SEEDS]).papers
    assert len(papers) == 38
    for paper in papers:
        title = paper.title
        assert "…" not in title and not title.endswith((".", ",", ":")), title
        assert title.split()[-1].lower() not in {"a", "an", "the", "of", "for", "in", "to", "and", "with", "as"}, title
        assert not title.lower().startswith(("we ", "this paper", "large language model")), title
        assert len(title) <= 110, title


def test_derived_titles_name_the_contribution():
    from rag_bot.text import derive_title

    assert derive_title("Prior work is slow. We therefore propose TIPEX, a controllable execution framework that "
                        "unifies two levels of parallelism.") == "TIPEX: Controllable execution framework"
    assert derive_title("Data are scarce. In response, we introduce Op-CAD, the first large-scale, multi-modal "
                        "dataset for operation-oriented CAD generation, encompassing four operation types.") == \
        "Op-CAD: First large-scale, multi-modal dataset for operation-oriented CAD generation"
    assert derive_title("Prompt sensitivity is well studied; here, we instead study output policy: algorithm choice "
                        "under fixed correctness.") == "Output policy: algorithm choice under fixed correctness"


def test_topic_acronyms_and_what_they_stand_for():
    from rag_bot.topics import holds_acronym, topic_acronyms
    assert topic_acronyms("quantizing or compressing LLM weights") == ["LLM"]
    assert topic_acronyms("KV cache eviction in LLMs") == ["KV", "LLM"]
    assert topic_acronyms("evaluating language models") == []
    assert holds_acronym("We study Large Language Model inference.", "LLM")
    assert holds_acronym("LLMs are costly to serve.", "LLM")
    assert holds_acronym("A key-value cache.", "KV")
    assert not holds_acronym("We train a convolutional network.", "LLM")
    assert not holds_acronym("See https://llm.example.org for data.", "LLM")


def test_a_questions_concepts_are_named_as_noun_phrases():
    from rag_bot.topics import question_concepts
    def names(topic: str) -> list[str]:
        return [name for name, _, _ in question_concepts(topic)]

    assert names("detect fake news on social media") == ["fake news", "social media"]
    assert names("large language models for code review") == ["large language models", "code review"]
    # Asides, examples and closing words of a chatty question are not concepts.
    assert names("federated learning on wearable health sensor data (smartwatches, fitness trackers)") == \
        ["federated learning", "wearable health sensor data"]
    assert names("Has causal discovery been applied to climate or atmospheric data in any of these papers") == \
        ["causal discovery", "climate or atmospheric data"]
    assert names("GAN-based music generation") == ["music generation", "GAN"]
