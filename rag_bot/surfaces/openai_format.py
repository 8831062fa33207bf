"""OpenAI's chat-completion shapes for rag-bot's answers: the message text and the conversation from a request, the completion and its stream chunks (SSE), the References list, the `rag_bot` extension field, `usage` in word pieces, and errors in OpenAI's format."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from fastapi.responses import JSONResponse

from rag_bot.errors import EmptyQuestionError, NoIndexError, QuestionTooLongError, StoreError
from rag_bot.types import Answer, Citation, Mode, Turn

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)


class APIError(Exception):
    """An error answered in OpenAI's format."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error", code: str | None = None,
                 param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param

    def body(self) -> dict[str, object]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def error_of(exc: BaseException) -> APIError:
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, EmptyQuestionError):
        return APIError(400, "the question (the last user message) is empty", code="empty_question",
                        param="messages")
    if isinstance(exc, QuestionTooLongError):
        return APIError(400, str(exc), code="question_too_long", param="messages")  # the last user message
    if isinstance(exc, NoIndexError):
        return APIError(503, f"{exc}", "server_error", code="no_index")
    if isinstance(exc, StoreError):
        return APIError(503, f"{exc}", "server_error", code="store_unavailable")
    return APIError(500, f"unexpected error ({type(exc).__name__}); see the server's log", "server_error")


DEFAULT_MODEL = "rag-bot"


REFERENCES_HEADING = "References"


_REFERENCE = re.compile(r"^\[(\d+)\]\s+(.*?)\s+\(([^()\s]+)\)\s*$")


CREATED = int(time.time())


# --- messages -> question and history ------------------------------------------------------------------------
def message_text(content: object) -> str:
    """The text of a message's content: a string, or OpenAI's list of parts (text parts are kept)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text") and isinstance(
                part.get("text"), str
            ):
                parts.append(part["text"])
        return "\n".join(parts)
    raise APIError(400, "a message's content must be a string or a list of content parts", param="messages")


def split_references(text: str) -> tuple[str, list[Citation]]:
    """An assistant message as this API wrote it: its answer text and the citations of its References list."""
    lines = text.rstrip().splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip().rstrip(":") == REFERENCES_HEADING:
            refs = [_REFERENCE.match(line.strip()) for line in lines[i + 1:] if line.strip()]
            if refs and all(refs):
                citations = [Citation(n=int(m[1]), doc_id=m[3], title=m[2], source="", quote="") for m in refs if m]
                return "\n".join(lines[:i]).rstrip(), citations
            break
    return text.strip(), []


def conversation(messages: object, mode: Mode | None) -> tuple[str, list[Turn]]:
    """The question (the last user message) and the earlier turns (each user message with the assistant's reply)."""
    if not isinstance(messages, list) or not messages:
        raise APIError(400, "'messages' must be a non-empty list of messages", param="messages")
    turns: list[Turn] = []
    question: str | None = None
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise APIError(400, "each message must be an object with a 'role'", param="messages")
        role, text = message["role"], message_text(message.get("content"))
        if role == "user":
            if question is not None:
                turns.append(Turn(question=question))
            question = text
        elif role == "assistant" and question is not None:
            body, citations = split_references(text)
            answer = Answer(question=question, mode=mode or "ask", answer=body, grounded=bool(citations),
                            citations=citations, retrieved=[])
            turns.append(Turn(question=question, answer=answer))
            question = None
        # system, developer and tool messages do not change what is asked
    if question is None:
        raise APIError(400, "the conversation must end with a user message (the question)", param="messages")
    return question, turns


# --- answers -> OpenAI shapes ------------------------------------------------------------------------------
def references(answer: Answer) -> str:
    """The References list appended to the answer text ('' when nothing is cited); raw: each caller sanitises the
    text it appends it to, as one (`rag_bot.sanitize`)."""
    if not answer.citations:
        return ""
    lines = [f"[{c.n}] {c.title} ({c.doc_id})" for c in answer.citations]
    return f"\n\n{REFERENCES_HEADING}:\n" + "\n".join(lines)


def extension(answer: Answer) -> dict[str, object]:
    """The `rag_bot` extension field: the JSON contract's citations (each with its probability), certainty, grounded
    and retrieved, the mode, a notice;
    their titles, quotes and notice made safe for Markdown clients, any url http(s) only (`rag_bot.sanitize`)."""
    from rag_bot.sanitize import markdown_safe, safe_fields

    return {
        "citations": [safe_fields(c.model_dump()) for c in answer.citations],  # as in the JSON contract
        "grounded": answer.grounded,
        "certainty": answer.certainty,
        "searched_for": markdown_safe(answer.searched_for) if answer.searched_for else None,
        "retrieved": [safe_fields(r) for r in answer.retrieved],
        "mode": answer.mode,
        "llm": answer.llm,
        "notice": markdown_safe(answer.notice) if answer.notice else answer.notice,
    }


@lru_cache(maxsize=1)
def _word_pieces() -> Tokenizer:
    """The shipped model's tokenizer, untruncated: what `usage` counts in."""
    from tokenizers import Tokenizer

    from rag_bot.store.embedding import model_files

    tokenizer = Tokenizer.from_file(str(model_files()[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def usage(prompt: str, content: str) -> dict[str, int]:
    """OpenAI's `usage` in word pieces of the shipped model (no model is billed: clients read it, some need it)."""
    counts = [len(e.ids) - 2 if text else 0 for text, e in zip((prompt, content),
                                                              _word_pieces().encode_batch([prompt, content]))]
    return {"prompt_tokens": counts[0], "completion_tokens": counts[1], "total_tokens": sum(counts)}


def prompt_text(messages: object) -> str:
    """The text of a request's messages, as `usage` counts it."""
    parts = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(parts)


def completion(answer: Answer, model: str, prompt: str = "") -> dict[str, object]:
    """A `chat.completion` object, its text made safe for Markdown clients (`rag_bot.sanitize`)."""
    from rag_bot.sanitize import markdown_safe

    content = markdown_safe(answer.answer + references(answer))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content, "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }],
        "usage": usage(prompt, content),
        "rag_bot": extension(answer),
    }


def _chunk(cid: str, created: int, model: str, delta: dict[str, object], finish: str | None = None,
           **extra: object) -> str:
    chunk = {
        "id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


def sse(events: Iterator[str | Answer], first: str | Answer | None, model: str,
        prompt: str | None = None) -> Iterator[str]:
    """Server-sent events of a streamed answer: text deltas, the References list, then a final chunk with
    `finish_reason` "stop" and the `rag_bot` field, then (when `prompt` is given: `stream_options.include_usage`)
    a chunk with no choices and the `usage`, then `data: [DONE]`."""
    from rag_bot.sanitize import MarkdownStream

    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    yield _chunk(cid, created, model, {"role": "assistant", "content": ""})
    shown: list[str] = []
    sent: list[str] = []  # the content as the client receives it (sanitised), which `usage` counts
    answer: Answer | None = None
    # The deltas sanitised as one text (the same as the unstreamed answer's): an image or a tag split across
    # deltas is held back until it is whole.
    safe = MarkdownStream()

    def _ended(error: APIError) -> Iterator[str]:  # what was held back, then the error, then the end
        if rest := safe.close():
            yield _chunk(cid, created, model, {"content": rest})
        yield f"data: {json.dumps(error.body())}\n\n"
        yield "data: [DONE]\n\n"

    try:
        for event in _chain([first] if first is not None else [], events):
            if isinstance(event, Answer):
                answer = event
            elif event:
                shown.append(event)
                if piece := safe.feed(event):
                    sent.append(piece)
                    yield _chunk(cid, created, model, {"content": piece})
    except Exception as exc:  # headers are sent: the error goes in the stream, in OpenAI's format
        log.warning("streamed answer failed (%s)", type(exc).__name__, exc_info=log.isEnabledFor(logging.DEBUG))
        yield from _ended(error_of(exc))
        return
    if answer is None:
        yield from _ended(APIError(500, "the answer stream ended early", "server_error"))
        return
    text = "".join(shown).strip()
    tail = ""
    if text != answer.answer.strip():
        # The model failed mid-answer and the offline composer answered instead: the checked answer is what counts.
        tail = ("\n\n---\n" if text else "") + answer.answer
    tail += references(answer)
    if rest := safe.feed(tail) + safe.close():
        sent.append(rest)
        yield _chunk(cid, created, model, {"content": rest})
    yield _chunk(cid, created, model, {}, "stop", rag_bot=extension(answer))
    if prompt is not None:
        chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                 "system_fingerprint": None, "choices": [], "usage": usage(prompt, "".join(sent))}
        yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
    yield "data: [DONE]\n\n"


def _chain(first: list[str | Answer], rest: Iterator[str | Answer]) -> Iterator[str | Answer]:
    yield from first
    yield from rest
