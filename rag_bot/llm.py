"""LLM-written answers through OpenAI or any OpenAI-compatible server, with every citation checked before it is
shown.

`LLMComposer` has the offline composer's `compose(question, papers, mode, max_papers) -> Answer` plus
`compose_stream`, which yields the model's text as it arrives and then the checked `Answer`. The model writes
from numbered, delimited sources (rag_bot/prompts.py); its `[n]` markers are checked as they stream: markers that
point to no source are dropped, the rest renumbered by first use, and each cited paper is quoted with the sentence
of its abstract closest to the claim. A model that cannot be reached, refuses the key or keeps failing never breaks
an answer: the offline composer writes it instead, with a one-line notice.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from llama_index.core.llms import LLM, ChatMessage
from llama_index.core.llms.mock import MockLLM

from rag_bot.compose import OfflineComposer, PaperSynthesizer, detect_mode
from rag_bot.prompts import ANSWER_USER_TEMPLATE, CONDENSE_TEMPLATE, answer_messages, condense_messages
from rag_bot.settings import Settings
from rag_bot.text import clean_markup
from rag_bot.types import Answer, Citation, Mode, Paper, ScoredPaper, final_answer

OPENAI_API_BASE = "https://api.openai.com/v1"
RETRY_BACKOFF_S = 0.5  # first wait before a retry; doubled on each further attempt
MAX_RETRY_AFTER_S = 20.0  # longest Retry-After (sent with a 429) that is honoured
REWRITE_MAX_TOKENS = 96  # a standalone question is one line

_MARKER = re.compile(r"\[\s*(\d{1,3}(?:\s*(?:,|;|-|–)\s*\d{1,3})*)\s*\]")
_PARTIAL_MARKER = re.compile(r"\[[\d\s,;\-–]*$")  # the start of a marker that the next delta may complete


def uses_llm(settings: Settings) -> bool:
    """Whether answers are written by an LLM: `auto` picks one when a key or a base URL is set."""
    if settings.llm == "auto":
        return bool(settings.openai_api_key or settings.openai_base_url)
    return settings.llm in ("openai", "local")


class LLMUnavailable(RuntimeError):
    """The model could not write the answer; the message is the one-line reason shown to the user."""


class CitationChecker:
    """Checks the `[n]` markers of a model's answer as its text streams in (n = 1..`sources`).

    Markers that point to no source are removed (with the space before them) and counted; a marker repeating a
    source just cited is dropped; `[1, 3]` and `[2-4]` become `[1][3]` and `[2][3][4]`; the sources are renumbered
    by first use, so the text comes out with markers 1..k without gaps. What `feed` returns is final: a marker split
    across deltas is held back until it is complete.
    """

    def __init__(self, sources: int) -> None:
        self.sources = sources
        self.order: list[int] = []  # the model's source numbers, in order of first use
        self.removed = 0  # markers that pointed to no source
        self.duplicates = 0  # markers repeating the source(s) just cited
        self._pending = ""  # raw text not yet checked
        self._space = ""  # whitespace held back: dropped if a removed marker follows it
        self._last: set[int] = set()  # sources cited since the last word of text
        self._dropped = ""  # the space that stood before a removed marker
        self._out: list[str] = []

    @property
    def text(self) -> str:
        """The checked text so far."""
        return "".join(self._out).strip()

    def feed(self, delta: str) -> str:
        """Check the next piece of the model's text; returns the checked text that can be shown now."""
        self._pending += delta
        return self._drain(final=False)

    def finish(self) -> str:
        """Check whatever is left at the end of the answer."""
        return self._drain(final=True)

    def _drain(self, final: bool) -> str:
        start = len(self._out)
        while self._pending:
            match = _MARKER.search(self._pending)
            if match:
                self._emit_text(self._pending[: match.start()])
                self._emit_marker(match.group(1))
                self._pending = self._pending[match.end():]
                continue
            partial = _PARTIAL_MARKER.search(self._pending)
            if partial and not final and len(self._pending) - partial.start() < 24:
                self._emit_text(self._pending[: partial.start()])
                self._pending = self._pending[partial.start():]
                break
            self._emit_text(self._pending)
            self._pending = ""
        return "".join(self._out[start:])

    def _emit_text(self, text: str) -> None:
        body = text.rstrip()
        if not body:
            self._space += text
            return
        prefix = self._space
        if not prefix and not (body[0].isspace() or body[0] in ".,;:!?)"):
            prefix = self._dropped  # "A [99]word": keep one space; "A [99]." and "A [99] more" need none
        self._out.append(prefix + body)
        self._space, self._dropped = text[len(body):], ""
        self._last = set()

    def _emit_marker(self, group: str) -> None:
        numbers: list[int] = []
        for part in re.split(r"\s*[,;]\s*", group.strip()):
            ends = [int(x) for x in re.split(r"\s*[-–]\s*", part) if x]
            if len(ends) == 2 and 0 <= ends[1] - ends[0] <= 10:
                numbers.extend(range(ends[0], ends[1] + 1))
            else:
                numbers.extend(ends)
        marks = []
        for k in dict.fromkeys(numbers):
            if not 1 <= k <= self.sources:
                self.removed += 1
            elif k in self._last:
                self.duplicates += 1
            else:
                if k not in self.order:
                    self.order.append(k)
                self._last.add(k)
                marks.append(f"[{self.order.index(k) + 1}]")
        self.duplicates += len(numbers) - len(dict.fromkeys(numbers))
        if marks:
            self._out.append((self._space or self._dropped) + "".join(marks))
            self._space, self._dropped = "", ""
        else:  # the marker goes, and the space before it unless text needs it
            self._dropped = self._dropped or self._space
            self._space = ""


def claims_by_marker(text: str) -> dict[int, list[str]]:
    """For each `[n]` of a checked answer, the claims it ends: the sentence, line or table cell before it."""
    claims: dict[int, list[str]] = {}
    for match in re.finditer(r"\[(\d+)\]", text):
        head = text[: match.start()]
        cut = max(head.rfind("\n"), head.rfind("|"), *(head.rfind(p) for p in (". ", "! ", "? ")))
        claim = _MARKER.sub("", head[cut + 1:]).strip(" *-:|")
        if len(claim) < 12 and cut > 0:  # "Claim. [1]": the marker follows the sentence it supports
            earlier = head[:cut]
            cut2 = max(earlier.rfind("\n"), earlier.rfind("|"), *(earlier.rfind(p) for p in (". ", "! ", "? ")))
            claim = _MARKER.sub("", head[cut2 + 1:]).strip(" *-:|")
        if claim:
            claims.setdefault(int(match.group(1)), []).append(claim)
    return claims


class LLMComposer(PaperSynthesizer):
    """Cited answers written by a chat model (OpenAI, any OpenAI-compatible server, or a local GGUF)."""

    def __init__(self, offline: OfflineComposer, settings: Settings, backoff: float = RETRY_BACKOFF_S) -> None:
        super().__init__(llm=MockLLM())  # the real model is connected on first use (a local one is started then)
        self.offline = offline
        self.settings = settings
        self.backoff = backoff
        self._llms: dict[int, LLM] = {}
        self._broken: str | None = None  # a reason that will not change (no key, no GGUF): not retried
        self._base_url: str | None = None

    # --- the model ------------------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        """The name answers report in `llm`: the model, or for a local GGUF its file name."""
        if self.settings.llm == "local":
            from rag_bot.local_llm import model_name

            return model_name(self.settings.gguf) if self.settings.gguf else "local"
        return self.settings.llm_model

    def connect(self, max_tokens: int | None = None) -> LLM:
        """The llama-index LLM that writes answers (`OpenAI` for OpenAI's models, `OpenAILike` for any other)."""
        max_tokens = max_tokens or self.settings.llm_max_tokens
        if self._broken:
            raise LLMUnavailable(self._broken)
        s = self.settings
        if max_tokens in self._llms and s.llm != "local":
            return self._llms[max_tokens]
        common: dict[str, Any] = dict(
            temperature=s.llm_temperature, max_tokens=max_tokens, timeout=s.llm_timeout,
            max_retries=0,  # retries (with backoff, only for timeouts, 429 and 5xx) are done here
        )
        if s.llm == "local":
            from rag_bot.local_llm import LocalModelError, local_server

            try:
                base = local_server(s.gguf).start() + "/v1"  # (re)starts the server if it is not running
            except LocalModelError as exc:
                self._broken = str(exc)
                raise LLMUnavailable(self._broken) from exc
            if base != self._base_url:  # a restarted server listens on a new port
                self._llms.clear()
            if max_tokens in self._llms:
                return self._llms[max_tokens]
            llm = self._openai_like(self.model_name, base, "local", **common)
        else:
            if not (s.openai_api_key or s.openai_base_url):
                self._broken = "no OPENAI_API_KEY or OPENAI_BASE_URL is set"
                raise LLMUnavailable(self._broken)
            from llama_index.llms.openai.utils import ALL_AVAILABLE_MODELS

            base = s.openai_base_url or OPENAI_API_BASE
            key = s.openai_api_key or "none"  # OpenAI-compatible servers often need no key; the client needs one
            if s.llm_model in ALL_AVAILABLE_MODELS:
                from llama_index.llms.openai import OpenAI

                llm = OpenAI(model=s.llm_model, api_base=base, api_key=key, **common)
            else:  # OpenAI's class refuses model names it does not know
                llm = self._openai_like(s.llm_model, base, key, **common)
        self._base_url = base
        self._llms[max_tokens] = llm
        return llm

    @staticmethod
    def _openai_like(model: str, base: str, key: str, **common: Any) -> LLM:
        from llama_index.llms.openai_like import OpenAILike

        return OpenAILike(model=model, api_base=base, api_key=key, is_chat_model=True, context_window=8192,
                          **common)

    def _classify(self, exc: Exception) -> tuple[bool, str]:
        """Whether a failed request is worth retrying, and the one-line reason to show."""
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return True, f"no reply within {self.settings.llm_timeout:g} s"
        if isinstance(exc, openai.RateLimitError):
            if "insufficient_quota" in str(exc):
                return False, "the account's quota is used up (429)"
            return True, "rate-limited (429)"
        if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
            return True, f"server error ({exc.status_code})"
        if isinstance(exc, openai.AuthenticationError):
            return False, "the API key was refused (401)"
        if isinstance(exc, openai.NotFoundError) or (
            isinstance(exc, openai.BadRequestError) and "model" in str(exc).lower()
        ):
            return False, f"the server does not know the model '{self.model_name}' ({getattr(exc, 'status_code', '')})"
        if isinstance(exc, openai.APIStatusError):
            return False, f"the server refused the request ({exc.status_code})"
        if isinstance(exc, openai.APIConnectionError):
            return False, f"cannot reach {self._base_url}"
        return False, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'failed'}"

    def _delay(self, exc: Exception, attempt: int) -> float:
        """How long to wait before the next attempt: the server's Retry-After, else exponential backoff."""
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            if retry_after is not None:
                return min(max(float(retry_after), 0.0), MAX_RETRY_AFTER_S)
        except ValueError:
            pass
        return float(self.backoff * 2**attempt)

    def generate(self, messages: Sequence[ChatMessage], stream: bool, max_tokens: int | None = None) -> Iterator[str]:
        """The model's reply as text deltas (one delta when not streaming), retrying timeouts, 429 and 5xx with
        backoff; raises `LLMUnavailable` with the reason when it cannot (or after some text has been shown)."""
        llm = self.connect(max_tokens)
        retries = max(0, self.settings.llm_retries)
        for attempt in range(retries + 1):
            received = False
            try:
                if stream:
                    for chunk in llm.stream_chat(messages):
                        if chunk.delta:
                            received = True
                            yield chunk.delta
                else:
                    text = llm.chat(messages).message.content or ""
                    received = True
                    yield text
                return
            except Exception as exc:  # any failure of the model becomes a fallback, never a traceback
                retryable, reason = self._classify(exc)
                if received or not retryable or attempt == retries:
                    if retryable and not received:
                        reason += f"; gave up after {attempt + 1} attempt{'s' if attempt else ''}"
                    raise LLMUnavailable(reason) from exc
                time.sleep(self._delay(exc, attempt))

    # --- follow-ups -------------------------------------------------------------------------------------
    def rewrite_question(self, question: str, history: Sequence[tuple[str, str]]) -> str | None:
        """A follow-up rewritten by the model into a standalone question (None if the model cannot)."""
        try:
            reply = "".join(self.generate(condense_messages(question, history), stream=False,
                                          max_tokens=REWRITE_MAX_TOKENS))
        except LLMUnavailable:
            return None
        lines = [line.strip() for line in reply.splitlines() if line.strip()]
        if not lines:
            return None
        rewritten = re.sub(r"^(?:standalone question|question)\s*:\s*", "", lines[0], flags=re.IGNORECASE)
        rewritten = rewritten.strip(" \"'“”*")
        return rewritten if 3 <= len(rewritten) <= 500 else None

    # --- composing --------------------------------------------------------------------------------------
    def evidence(self, question: str, papers: Sequence[ScoredPaper]) -> float:
        """The offline composer's evidence score (the refusal rule is the same with a model)."""
        return self.offline.evidence(question, papers)

    def is_grounded(self, question: str, papers: Sequence[ScoredPaper]) -> bool:
        """Whether the collection holds something relevant (the offline composer's calibrated rule)."""
        return self.offline.is_grounded(question, papers)

    def select_sources(
        self, papers: Sequence[ScoredPaper], mode: Mode, max_papers: int | None = None
    ) -> list[ScoredPaper]:
        """The papers given to the model as sources: those close enough to the best match to cite."""
        limit = max_papers or (self.settings.answer_papers if mode == "summary" else 4)
        if mode == "compare":
            named = [p for p in papers if p.named]
            rest = [p for p in self.offline.relevant(papers, 0.15, limit) if not p.named]
            chosen = (named + rest)[: max(2, len(named))]
            return chosen if len(chosen) >= 2 else list(papers[:2])
        return self.offline.relevant(papers, margin=0.15, limit=limit)

    def compose(
        self, question: str, papers: Sequence[ScoredPaper], mode: Mode | None = None, max_papers: int | None = None
    ) -> Answer:
        """A cited answer written by the model in one request (the offline composer's when it cannot)."""
        return final_answer(self._compose(question, papers, mode, max_papers, stream=False))

    def compose_stream(
        self, question: str, papers: Sequence[ScoredPaper], mode: Mode | None = None, max_papers: int | None = None
    ) -> Iterator[str | Answer]:
        """The model's checked text as it streams (deltas), then the final `Answer`."""
        yield from self._compose(question, papers, mode, max_papers, stream=True)

    def _compose(
        self, question: str, papers: Sequence[ScoredPaper], mode: Mode | None, max_papers: int | None, stream: bool
    ) -> Iterator[str | Answer]:
        mode = mode or detect_mode(question)
        if not self.is_grounded(question, papers):
            # The calibrated refusal stays the offline composer's: asking a model to answer from sources that do
            # not hold the answer invites an invented one.
            yield from self._offline(question, papers, mode, max_papers, notice=None)
            return
        sources = self.select_sources(papers, mode, max_papers)
        checker = CitationChecker(len(sources))
        try:
            for delta in self.generate(answer_messages(question, [s.paper for s in sources], mode), stream):
                checked = checker.feed(delta)
                if checked:
                    yield checked
            tail = checker.finish()
            if tail:
                yield tail
            if not checker.text:
                raise LLMUnavailable("the model returned an empty answer")
        except LLMUnavailable as exc:
            notice = f"The language model ({self.model_name}) could not answer: {exc}. " \
                     f"This answer is from the offline composer."
            yield from self._offline(question, papers, mode, max_papers, notice=notice)
            return
        yield self._checked_answer(question, papers, mode, [s.paper for s in sources], checker)

    def _offline(
        self, question: str, papers: Sequence[ScoredPaper], mode: Mode, max_papers: int | None, notice: str | None
    ) -> Iterator[str | Answer]:
        answer = self.offline.compose(question, papers, mode=mode, max_papers=max_papers)
        answer.notice = notice
        yield from re.findall(r"\S+\s*|\s+", answer.answer)
        yield answer

    def _checked_answer(
        self, question: str, papers: Sequence[ScoredPaper], mode: Mode, sources: list[Paper], checker: CitationChecker
    ) -> Answer:
        text = checker.text
        cited = [sources[k - 1] for k in checker.order]
        claims = claims_by_marker(text)
        citations = [
            Citation(n=n, doc_id=paper.doc_id, title=clean_markup(paper.title), source=paper.source,
                     quote=self.best_quote(paper, claims.get(n, [])))
            for n, paper in enumerate(cited, start=1)
        ]
        notices = []
        if checker.removed:
            notices.append(f"{checker.removed} citation marker{'s' if checker.removed > 1 else ''} pointing to no "
                           f"source {'were' if checker.removed > 1 else 'was'} removed.")
        if not citations:
            notices.append("The model's answer cites none of the retrieved abstracts: treat it as unsupported.")
        return Answer(
            question=question, mode=mode, answer=text, grounded=bool(citations), citations=citations,
            retrieved=[{"doc_id": p.paper.doc_id, "score": p.score} for p in papers[:10]],
            llm=self.model_name, notice=" ".join(notices) or None,
        )

    def best_quote(self, paper: Paper, claims: list[str]) -> str:
        """The sentence of the paper's abstract that best supports the claims citing it."""
        sentences, vectors = self.offline.sentence_vectors(paper)
        if not claims:
            return sentences[0]
        similarity = vectors @ self.offline.embedder.embed(claims).T  # unit vectors: cosine similarity
        return sentences[int(np.argmax(similarity.max(axis=1)))]

    # --- llama-index synthesizer interface ---------------------------------------------------------------
    def _get_prompts(self) -> dict[str, Any]:
        return {"answer": ANSWER_USER_TEMPLATE, "condense": CONDENSE_TEMPLATE}

