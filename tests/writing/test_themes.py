"""Theme headings (rag_bot/writing/themes.py): every paper under a heading names it; no heading rather than a weak one."""

from __future__ import annotations

import re
from dataclasses import replace

import rag_bot.writing.themes as themes
from rag_bot.writing.offline import OfflineComposer

SUMMARIES = ["Summarize the work on LLM inference serving", "Summarize the work on federated fine-tuning",
             "Give me an overview of the papers on steering language models", "Summarize the work on quantization"]


def blocks(answer: str) -> list[tuple[str, list[str]]]:
    """(heading, cited numbers under it) of a summary's themed blocks."""
    out = []
    for block in answer.split("\n\n")[1:]:
        lines = block.split("\n")
        heading = lines[0][2:-2] if lines[0].startswith("**") and lines[0].endswith("**") else ""
        numbers = [n for line in lines for n in re.findall(r"\[(\d+)\]\s*$", line)]
        out.append((heading, numbers))
    return out


def test_every_paper_under_a_heading_names_it_in_its_title_or_what_it_does(engine, monkeypatch):
    """With the fitted cut at 0 every group is headed by its likeliest candidate: a phrase each of its papers names
    in its title or in its method and problem sentences."""
    from rag_bot.text import clean_markup
    from rag_bot.writing.roles import sentence_roles

    model = replace(themes._model(), cuts={"fits": {"heading": 0.0}})
    monkeypatch.setattr(themes, "_model", lambda: model)
    headed = []
    for question in SUMMARIES:
        sources = engine.retriever.retrieve_papers(question)[:4]
        answer = OfflineComposer(engine.sentences, engine.settings).compose(question, "summary", sources)
        by_n = {str(c.n): engine.papers[c.doc_id] for c in answer.citations}
        headed += [(h, [by_n[x] for x in n]) for h, n in blocks(answer.answer)
                   if h not in ("", "Also on this topic", "Other related work")]
    assert len(headed) >= 2, headed
    for heading, papers in headed:
        for paper in papers:
            texts, vectors = engine.sentences.of(paper)
            about = " ".join([clean_markup(paper.title)] + [t for t, r in zip(texts, sentence_roles(vectors))
                                                            if r in ("method", "problem")]).lower()
            assert all(w.lower().rstrip("s") in about for w in heading.split()), (heading, paper.title)


def test_headings_are_the_same_when_the_papers_are_grouped_again(engine):
    question = SUMMARIES[0]
    sources = engine.retriever.retrieve_papers(question)[:4]
    cached = OfflineComposer(engine.sentences, engine.settings)
    first = cached.compose(question, "summary", sources).answer
    again = cached.compose(question, "summary", sources).answer
    fresh = OfflineComposer(engine.sentences, engine.settings).compose(question, "summary", sources).answer
    assert first == again == fresh


def test_below_the_fitted_cut_a_group_gets_no_heading_and_keeps_its_papers(engine, monkeypatch):
    question = SUMMARIES[0]
    sources = engine.retriever.retrieve_papers(question)[:4]
    model = themes._model()
    monkeypatch.setattr(themes, "_model", lambda: replace(model, cuts={"fits": {"heading": 0.0}}))
    headed = OfflineComposer(engine.sentences, engine.settings).compose(question, "summary", sources)
    assert any(heading for heading, _ in blocks(headed.answer))
    monkeypatch.setattr(themes, "_model", lambda: replace(model, cuts={"fits": {"heading": 1.01}}))
    bare = OfflineComposer(engine.sentences, engine.settings).compose(question, "summary", sources)
    assert all(heading == "" for heading, _ in blocks(bare.answer))
    assert {c.doc_id for c in bare.citations} == {c.doc_id for c in headed.citations}
    assert len(bare.citations) == len(sources)
