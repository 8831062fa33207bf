"""LLM-written answers through OpenAI or any OpenAI-compatible server, with every citation checked before it is
shown.

`LLMComposer` is an answer writer (rag_bot/writing/compose.py `Composer`): it yields the model's text as it arrives, then
the checked `Answer`. The model writes from numbered, delimited sources (rag_bot/prompts.py); its `[n]` markers
are checked as they stream: markers that point to no source are dropped, the rest renumbered by first use, and
each cited paper is quoted with the sentence of its abstract closest to the claim. Timeouts, 429 and 5xx are
retried by the `openai` client itself (`llm_retries`); a model that still cannot answer raises
`WriterUnavailable` with a one-line reason, and the engine has the offline writer answer instead.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence

from llama_index.core.llms import LLM, ChatMessage
from llama_index.core.prompts.mixin import PromptDictType

from rag_bot.errors import WriterUnavailable
from rag_bot.prompts import ANSWER_USER_TEMPLATE, CONDENSE_TEMPLATE, answer_messages, condense_messages
from rag_bot.settings import Settings
from rag_bot.store.sentences import SentenceIndex
from rag_bot.text import clean_markup, mask_credentials
from rag_bot.types import Answer, Citation, Mode, Paper, ScoredPaper
from rag_bot.writing.citations import CitationChecker, claims_by_marker
from rag_bot.writing.compose import PaperSynthesizer

log = logging.getLogger(__name__)

OPENAI_API_BASE = "https://api.openai.com/v1"
REWRITE_MAX_TOKENS = 96  # a standalone question is one line
CONTEXT_WINDOW = 8192  # what llama-index assumes of an unknown OpenAI-compatible model

def uses_llm(settings: Settings) -> bool:
    """Whether answers are written by an LLM: `auto` picks one when a key or a base URL is set."""
    if settings.llm == "auto":
        return bool(settings.openai_api_key or settings.openai_base_url)
    return settings.llm in ("openai", "local")


class LLMComposer(PaperSynthesizer):
    """Cited answers written by a chat model (OpenAI, any OpenAI-compatible server, or a local GGUF)."""

    def __init__(self, sentences: SentenceIndex, settings: Settings) -> None:
        super().__init__(sentences, settings)
        self._llms: dict[int, LLM] = {}
        self._broken: str | None = None  # a reason that will not change (no key, no GGUF): not retried
        self._base_url: str | None = None

    # --- the model ------------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The name answers report in `llm`: the model, or for a local GGUF its file name."""
        if self.settings.llm == "local":
            from rag_bot.writing.local_llm import model_name

            return model_name(self.settings.gguf) if self.settings.gguf else "local"
        return self.settings.llm_model

    def connect(self, max_tokens: int | None = None) -> LLM:
        """The llama-index LLM that writes answers, over an `openai` client that does the retrying."""
        max_tokens = max_tokens or self.settings.llm_max_tokens
        if self._broken:
            raise WriterUnavailable(self._broken)
        s = self.settings
        if s.llm == "local":
            from rag_bot.writing.local_llm import LocalModelError, local_server

            try:
                base = local_server(s.gguf).start() + "/v1"  # (re)starts the server if it is not running
            except LocalModelError as exc:
                self._broken = str(exc)
                raise WriterUnavailable(self._broken) from exc
            key = "local"
        else:
            if not (s.openai_api_key or s.openai_base_url):
                self._broken = "no OPENAI_API_KEY or OPENAI_BASE_URL is set"
                raise WriterUnavailable(self._broken)
            base = s.openai_base_url or OPENAI_API_BASE
            key = s.openai_api_key or "none"  # OpenAI-compatible servers often need no key; the client needs one
        if base != self._base_url:  # a restarted local server listens on a new port
            self._llms.clear()
            self._base_url = base
        if max_tokens not in self._llms:
            import openai
            from llama_index.llms.openai_like import OpenAILike

            client = openai.OpenAI(base_url=base, api_key=key, max_retries=max(0, s.llm_retries),
                                   timeout=s.llm_timeout)
            self._llms[max_tokens] = OpenAILike(
                model=self.name, api_base=base, api_key=key, is_chat_model=True, context_window=CONTEXT_WINDOW,
                temperature=s.llm_temperature, max_tokens=max_tokens, timeout=s.llm_timeout,
                openai_client=client,
                max_retries=0,  # llama-index's own retry loop stays off: the client above retries
            )
        return self._llms[max_tokens]

    def _reason(self, exc: Exception) -> str:
        """The one-line reason to show for a request that failed (after the client's retries)."""
        import openai

        retried = f"; gave up after {self.settings.llm_retries + 1} attempts" if self.settings.llm_retries > 0 else ""
        if isinstance(exc, openai.APITimeoutError):
            return f"no reply within {self.settings.llm_timeout:g} s{retried}"
        if isinstance(exc, openai.RateLimitError):
            if "insufficient_quota" in str(exc):
                return "the account's quota is used up (429)"
            return f"rate-limited (429){retried}"
        if isinstance(exc, openai.APIStatusError) and exc.status_code >= 500:
            return f"server error ({exc.status_code}){retried}"
        if isinstance(exc, openai.AuthenticationError):
            return "the API key was refused (401)"
        if isinstance(exc, openai.NotFoundError) or (
            isinstance(exc, openai.BadRequestError) and "model" in str(exc).lower()
        ):
            return f"the server does not know the model '{self.name}' ({getattr(exc, 'status_code', '')})"
        if isinstance(exc, openai.APIStatusError):
            return f"the server refused the request ({exc.status_code})"
        if isinstance(exc, openai.APIConnectionError):
            return f"cannot reach {mask_credentials(self._base_url or '')}"
        return mask_credentials(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'failed'}")

    def generate(self, messages: Sequence[ChatMessage], stream: bool, max_tokens: int | None = None) -> Iterator[str]:
        """The model's reply as text deltas (one delta when not streaming); raises `WriterUnavailable` with the
        reason when it cannot. Text already shown is never retried."""
        llm = self.connect(max_tokens)
        try:
            if stream:
                for chunk in llm.stream_chat(messages):
                    if chunk.delta:
                        yield chunk.delta
            else:
                yield llm.chat(messages).message.content or ""
        except WriterUnavailable:
            raise
        except Exception as exc:  # any failure of the model becomes a fallback, never a traceback
            raise WriterUnavailable(self._reason(exc)) from exc

    # --- follow-ups -------------------------------------------------------------------------------------
    def rewrite_question(self, question: str, history: Sequence[tuple[str, str]]) -> str | None:
        """A follow-up rewritten by the model into a standalone question (None if the model cannot)."""
        try:
            reply = "".join(self.generate(condense_messages(question, history), stream=False,
                                          max_tokens=REWRITE_MAX_TOKENS))
        except WriterUnavailable as exc:
            log.warning("the follow-up could not be rewritten (%s); retrieving with the question as asked", exc,
                        exc_info=log.isEnabledFor(logging.DEBUG))
            return None
        lines = [line.strip() for line in reply.splitlines() if line.strip()]
        if not lines:
            return None
        rewritten = re.sub(r"^(?:standalone question|question)\s*:\s*", "", lines[0], flags=re.IGNORECASE)
        rewritten = rewritten.strip(" \"'“”*")
        return rewritten if 3 <= len(rewritten) <= 500 else None

    # --- writing ----------------------------------------------------------------------------------------
    def write(self, question: str, mode: Mode, sources: Sequence[ScoredPaper], stream: bool,
              related: int = 0) -> Iterator[str | Answer]:
        """The model's checked text as it arrives (deltas), then the checked `Answer`."""
        papers = [s.paper for s in sources]
        checker = CitationChecker(len(papers))
        for delta in self.generate(answer_messages(question, papers, mode), stream):
            checked = checker.feed(delta)
            if checked:
                yield checked
        tail = checker.finish()
        if tail:
            yield tail
        if not checker.text:
            raise WriterUnavailable("the model returned an empty answer")
        yield self._checked_answer(question, mode, papers, checker)

    def _checked_answer(self, question: str, mode: Mode, sources: list[Paper], checker: CitationChecker) -> Answer:
        text = checker.text
        cited = [sources[k - 1] for k in checker.order]
        claims = claims_by_marker(text)
        citations = [
            Citation(n=n, doc_id=paper.doc_id, title=clean_markup(paper.title), source=paper.source,
                     quote=self.sentences.best_quote(paper, claims.get(n, [])))
            for n, paper in enumerate(cited, start=1)
        ]
        notices = []
        if checker.removed:
            notices.append(f"{checker.removed} citation marker{'s' if checker.removed > 1 else ''} pointing to no "
                           f"source {'were' if checker.removed > 1 else 'was'} removed.")
            log.info("removed %d citation markers pointing to no source", checker.removed)
        if not citations:
            notices.append("The model's answer cites none of the retrieved abstracts: treat it as unsupported.")
        return Answer(
            question=question, mode=mode, answer=text, grounded=bool(citations), citations=citations, retrieved=[],
            llm=self.name, notice=" ".join(notices) or None,
        )

    def _get_prompts(self) -> PromptDictType:
        return {"answer": ANSWER_USER_TEMPLATE, "condense": CONDENSE_TEMPLATE}


def default_writer(settings: Settings, sentences: SentenceIndex) -> PaperSynthesizer:
    """The writer the settings ask for: an LLM when `llm` (or `auto` with a key or base URL) says so, else the
    offline writer."""
    from rag_bot.writing.offline import OfflineComposer

    return LLMComposer(sentences, settings) if uses_llm(settings) else OfflineComposer(sentences, settings)


def judge_call(writer: LLMComposer) -> Callable[[Sequence[ChatMessage], int], str]:
    """The relevance judge's one call, made by the LLM writer's model: messages and a token budget to the whole
    reply (not streamed); `WriterUnavailable` when the model cannot answer."""

    def generate(messages: Sequence[ChatMessage], max_tokens: int) -> str:
        return "".join(writer.generate(messages, stream=False, max_tokens=max_tokens))

    return generate
