"""The offline writer: a cited answer composed from the sources' own sentences, with no model. `ask` gives each paper's most relevant method or result sentence, `summary` groups papers under headings where one fits (themes), `compare` a table of problem, approach and results, each cell a sentence of its row's role (roles)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np

from rag_bot import answer_words as words
from rag_bot.question import asks_for_number, topic_query
from rag_bot.settings import Settings
from rag_bot.store.sentences import SentenceIndex
from rag_bot.text import clean_markup
from rag_bot.types import Answer, Citation, Mode, Paper, ScoredPaper
from rag_bot.writing.cells import CELLS, CONTRIBUTION, cell_orders
from rag_bot.writing.compose import PaperSynthesizer, word_deltas
from rag_bot.writing.problems import PROBLEM_CUES, problem_sentence
from rag_bot.writing.quotes import clean_quote, quoted, reads_alone
from rag_bot.writing.roles import ROLES, role_probabilities, sentence_roles
from rag_bot.writing.themes import STOP_WORDS as _STOP
from rag_bot.writing.themes import Themes

NEARLY = 0.08  # a sentence this close to a paper's best (similarity + overlap) is as relevant as it (see _ask)


_WORD = re.compile(r"[a-z][a-z0-9\-]+")


def _terms(text: str) -> set[str]:
    return {w[:6] for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def _trim(sentence: str, limit: int = 320) -> str:
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _alone_first(scored: Sequence[tuple[float, str]], margin: float = NEARLY) -> list[tuple[float, str]]:
    """Scored sentences (best first) with, among those within `margin` of the best, the ones that read alone once
    cleaned (rag_bot/writing/quotes.py) ahead of the ones that point back at what they do not name."""
    k = sum(1 for x in scored if x[0] >= scored[0][0] - margin) if scored else 0
    return sorted(scored[:k], key=lambda x: not reads_alone(clean_quote(x[1]))) + list(scored[k:])


class _Citer:
    """Numbers sources by first use, so every [n] has a source and every source an [n]."""

    def __init__(self) -> None:
        self.citations: list[Citation] = []
        self._numbers: dict[str, int] = {}

    def cite(self, paper: Paper, quote: str) -> str:
        if paper.doc_id not in self._numbers:
            self._numbers[paper.doc_id] = len(self.citations) + 1
            self.citations.append(
                Citation(n=self._numbers[paper.doc_id], doc_id=paper.doc_id, title=clean_markup(paper.title),
                         source=paper.source, quote=quote)
            )
        return f"[{self._numbers[paper.doc_id]}]"


class OfflineComposer(PaperSynthesizer):
    """Extractive, cited answers in three modes (ask, summary, compare), written without a model."""

    def __init__(self, sentences: SentenceIndex, settings: Settings) -> None:
        super().__init__(sentences, settings)
        self.themes = Themes(sentences)

    @property
    def name(self) -> str:
        """Always "offline"."""
        return "offline"

    def write(self, question: str, mode: Mode, sources: Sequence[ScoredPaper], stream: bool,
              related: int = 0) -> Iterator[str | Answer]:
        """The whole answer at once, streamed in word-sized deltas (`stream` changes nothing here)."""
        answer = self.compose(question, mode, sources, related)
        yield from word_deltas(answer.answer)
        yield answer

    def compose(self, question: str, mode: Mode, sources: Sequence[ScoredPaper], related: int = 0) -> Answer:
        """A cited answer from the sources (at least one); a summary's opening counts the `related` papers listed
        after it."""
        citer = _Citer()
        if mode == "compare":
            text = self._compare(question, sources, citer)
        elif mode == "summary":
            text = self._summary(question, sources, citer, related)
        else:
            text = self._ask(question, sources, citer)
        return Answer(question=question, mode=mode, answer=text, grounded=True, citations=citer.citations,
                      retrieved=[])

    def _quoted(self, paper: ScoredPaper, sentence: str) -> tuple[str, str]:
        """(quote, shown) of one of the paper's sentences, led by the sentence before it when it points back."""
        texts = self.sentences.of(paper.paper)[0]
        i = texts.index(sentence) if sentence in texts else 0
        return quoted(sentence, texts[i - 1] if i > 0 else "")

    def _scored_sentences(self, question: str, papers: Sequence[ScoredPaper]) -> list[list[tuple[float, str]]]:
        """For each paper, its sentences with their relevance to the question (best first)."""
        query = self.sentences.query_vector(topic_query(question))
        pairs = [self.sentences.of(p.paper) for p in papers]
        sentences = [group for group, _ in pairs]
        sims = np.concatenate([vectors @ query for _, vectors in pairs])
        q_terms = _terms(topic_query(question))
        numeric = asks_for_number(question)
        out: list[list[tuple[float, str]]] = []
        i = 0
        for group in sentences:
            scored = []
            for position, sentence in enumerate(group):
                overlap = len(q_terms & _terms(sentence)) / max(len(q_terms), 1)
                score = float(sims[i]) + 0.3 * overlap
                if numeric and re.search(r"\d", sentence):
                    score += 0.2
                score -= 0.01 * position  # earlier sentences set the scene, later ones report
                if CONTRIBUTION.search(sentence):
                    score += 0.05  # what the paper does answers "what does the collection say about X"
                scored.append((score, sentence))
                i += 1
            out.append(sorted(scored, key=lambda x: -x[0]))
        return out

    def _ask(self, question: str, papers: Sequence[ScoredPaper], citer: _Citer) -> str:
        chosen = papers
        scored = [_alone_first(group) for group in self._scored_sentences(question, chosen)]
        lead_paper, lead = chosen[0], scored[0]
        parts = []
        first = lead[0][1]
        ref = citer.cite(lead_paper.paper, self._quoted(lead_paper, first)[0])
        picked = [first]
        # A second sentence from the best paper when it is nearly as relevant (details, figures).
        if len(lead) > 1 and lead[1][0] >= lead[0][0] - NEARLY:
            picked.append(lead[1][1])
        # A question about a topic also gets what the best paper contributes, when that is relevant.
        if not asks_for_number(question) and not any(CONTRIBUTION.search(s) for s in picked):
            contributions = [s for _, s in lead[:4] if CONTRIBUTION.search(s)]
            if contributions:
                picked.append(contributions[0])
        # A question about a figure gets the paper's best sentence that reports one.
        if asks_for_number(question) and not any(re.search(r"\d", s) for s in picked):
            figures = [s for _, s in lead if re.search(r"\d", s)]
            if figures:
                picked.append(figures[0])
        lines = [f"{self._quoted(lead_paper, s)[1]} {ref}" for s in picked]
        parts.append(f"**{clean_markup(lead_paper.paper.title)}** {ref}: " + " ".join(lines))
        others = []
        for paper, sentences in zip(chosen[1:], scored[1:]):
            if sentences and sentences[0][0] >= lead[0][0] - 0.25:
                quote, shown = self._quoted(paper, sentences[0][1])
                others.append(f"- **{clean_markup(paper.paper.title)}**: {shown} {citer.cite(paper.paper, quote)}")
        if others:
            parts.append(words.OTHER_PAPERS + "\n" + "\n".join(others))
        return "\n\n".join(parts)

    def _summary(self, question: str, papers: Sequence[ScoredPaper], citer: _Citer, related: int = 0) -> str:
        # The most central papers are summarised by theme; the others on the topic are listed after them.
        central, rest = list(papers[: self.settings.answer_papers]), list(papers[self.settings.answer_papers:])
        scored = self._scored_sentences(question, list(papers))
        lines: dict[str, str] = {}
        quotes: dict[str, str] = {}
        for paper, sentences in zip(papers, scored):
            # A paper's line says what it does or finds: the most relevant of its method and result sentences among
            # the four most relevant (rag_bot/writing/roles.py), else its most relevant sentence.
            texts, vectors = self.sentences.of(paper.paper)
            role = dict(zip(texts, sentence_roles(vectors)))
            ranked = sentences[:4]
            stating = [s for s in ranked if role.get(s[1]) in ("method", "result")]
            sentence = _alone_first(stating or ranked, margin=float("inf"))[0][1] if ranked else ""
            quote, shown = self._quoted(paper, sentence)
            lines[paper.paper.doc_id] = f"- **{clean_markup(paper.paper.title)}**: {_trim(shown)} {{cite}}"
            quotes[paper.paper.doc_id] = quote  # the quote is always the whole (cleaned) sentence
        themes = self.themes.group(question, central)
        headed = any(label for label, _ in themes)
        arrangement = ("central " if rest else "") + ("themes" if headed else "plain")
        opening = words.summary_opening(len(papers), related, arrangement, len(central), len(rest))
        blocks = [opening]
        for label, members in themes:
            rows = [lines[p.paper.doc_id].replace("{cite}", citer.cite(p.paper, quotes[p.paper.doc_id]))
                    for p in members]
            blocks.append((f"**{label}**\n" if label else "") + "\n".join(rows))
        if rest:
            rows = [f"- {clean_markup(p.paper.title)} {citer.cite(p.paper, quotes[p.paper.doc_id])}" for p in rest]
            blocks.append(words.ALSO_ON_TOPIC + "\n" + "\n".join(rows))
        return "\n\n".join(blocks)

    def _compare(self, question: str, papers: Sequence[ScoredPaper], citer: _Citer) -> str:
        named = [p for p in papers if p.named]
        if len(papers) == 1:  # nothing to compare it with: say so, and describe the one paper
            only = papers[0]
            return words.COMPARE_ONLY_ONE + self._ask(question, [only], citer)
        chosen = papers
        scored = self._scored_sentences(question, chosen)
        header = "| | " + " | ".join(f"**{_cell(clean_markup(p.paper.title))}**" for p in chosen) + " |"
        rows = [header, "|---" * (len(chosen) + 1) + "|"]
        picks: list[dict[str, str]] = []
        for paper, sentences in zip(chosen, scored):
            ordered = [s for _, s in sentences]
            body, vectors = self.sentences.of(paper.paper)
            role_p = role_probabilities(vectors)
            orders = cell_orders(body, role_p)
            probability = dict(zip(body, role_p))
            used: set[str] = set()
            pick: dict[str, str] = {}
            for row in ("Approach", "Problem", "Reported results"):
                if row in CELLS:  # the fitted choice (rag_bot/writing/cells.py): the likeliest sentence of the role
                    order = [body[i] for i in orders[row] if body[i] not in used]
                    pick[row] = order[0] if order else ""
                    used.add(pick[row])
                    continue
                # The Problem cell: the sentences the role model calls problem (those with a contrast or difficulty
                # word first), else the sentence that states it (rag_bot/writing/problems.py, fitted), else "—" (an
                # abstract that states no problem, not its background).
                k = ROLES.index("problem")
                pool = body[: max(2, len(body) // 2)]
                of_role = [s for s in body if s not in used and int(np.argmax(probability[s])) == k]
                cued = [s for s in pool if PROBLEM_CUES.search(s) and s not in used] or [s for s in ordered if s not in used]
                candidates = [s for s in cued if s in of_role] or sorted(of_role, key=lambda s: -probability[s][k])
                if not candidates:  # scored only when no sentence's likeliest role is problem
                    stated = problem_sentence(body, role_p, used)
                    candidates = [stated] if stated else []
                # A cell reads alone: a sentence that points back at what it does not name comes last.
                candidates = sorted(candidates, key=lambda s: not reads_alone(clean_quote(s)))
                sentence = candidates[0] if candidates else ""
                used.add(sentence)
                pick[row] = sentence
            picks.append(pick)
        for row in ("Problem", "Approach", "Reported results"):
            cells = []
            for paper, pick in zip(chosen, picks):
                sentence = self._quoted(paper, pick[row])[1] if pick[row] else ""
                cite = citer.cite(paper.paper, self._quoted(paper, pick["Approach"])[0])
                cells.append(f"{_cell(_trim(sentence))} {cite}" if sentence else "—")
            rows.append(f"| **{row}** | " + " | ".join(cells) + " |")
        intro = words.COMPARE_INTRO
        if len(named) < 2 and len(chosen) >= 2:
            intro = words.COMPARE_UNNAMED.format(count=len(chosen))
        return intro + "\n\n" + "\n".join(rows)
