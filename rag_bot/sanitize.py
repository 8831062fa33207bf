"""One set of rules for every surface that returns corpus or model text: the chat, the permalink page, the
OpenAI-compatible API and MCP.

Abstracts and LLM-written answers are untrusted. What a Markdown renderer would turn into something active is
unsafe: image syntax (`![x](url)`, `![x][ref]`: the reader's browser fetches the URL), raw HTML (tags, comments,
declarations: `<img onerror=…>`, `<script>`), link destinations whose scheme is not http(s) (`[x](javascript:…)`,
`<javascript:…>` autolinks, reference definitions `[r]: javascript:…`) and the `user:password@` of a URL. Two
encodings of the same rules:

- `markdown_safe` for Markdown and plain-text clients (API, MCP): only the unsafe constructs change, each by a
  CommonMark backslash escape of its one active character (`\\![x](…)`, `\\<img …>`, `[x]\\(javascript:…)`,
  `[r]\\: javascript:…`); "x < y", "[1]" and http(s) links pass unchanged. `MarkdownStream` gives the same text
  from pieces (server-sent deltas), holding back only an unfinished construct.
- `html_safe` for a renderer that takes HTML (the chat): everything HTML-escaped, the active characters as
  entities.

Every decision looks a bounded distance ahead (`DEST_WINDOW`, `CREDENTIAL_WINDOW`), so a stream is never held
longer than that, and the whole text is cut the same way: the pieces sanitise to the same text as the whole.
"""

from __future__ import annotations

import html
import re
import string
from collections.abc import Callable, Mapping

from rag_bot.text import mask_credentials

# How far past `](` or `]:` a link destination is read to find its scheme. "https:" spelt with numeric entities
# (`&#104;` ...) takes 36 characters; a destination still undecided after 64 (say, a scheme padded with `&Tab;`,
# which browsers drop) is treated as unsafe. The same bound caps how long a stream holds back after `](`.
DEST_WINDOW = 64
# The longest `user:password` masked after `://`. Longer runs are not credentials anyone types; the bound caps how
# long a stream holds back a URL's start.
CREDENTIAL_WINDOW = 128
SAFE_SCHEMES = ("http", "https")

_PUNCT = frozenset(string.punctuation)
_SCHEME = frozenset(string.ascii_letters + string.digits + "+-.")
# What a raw-HTML construct starts with after `<`: a tag name, a closing tag, a comment/declaration/CDATA, a
# processing instruction. `<` before anything else ("x < y", "p<0.05") is text to every renderer.
_HTML_START = frozenset(string.ascii_letters + "/!?")
_AUTOLINK = re.compile(rf"<https?://[^\s<>]{{1,{DEST_WINDOW}}}>", re.IGNORECASE)
_AUTOLINK_OPEN = re.compile(rf"<h(?:t(?:t(?:p(?:s?(?::(?:/(?:/[^\s<>]{{0,{DEST_WINDOW}}})?)?)?)?)?)?)?",
                            re.IGNORECASE)
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ENTITY_OPEN = re.compile(r"&(?:#[0-9]{0,7}|#[xX][0-9a-fA-F]{0,6}|[A-Za-z][A-Za-z0-9]{0,31})?")
_CANDIDATE = re.compile(r"[!<(:]")
_HTML_ENTITY = {"!": "&#33;", "<": "&lt;", "(": "&#40;", ":": "&#58;"}

Plan = Callable[[str, int, bool], tuple[list[tuple[int, int]], int]]
Render = Callable[[str, int, int, list[tuple[int, int]]], str]


def safe_url(url: str | None) -> str | None:
    """The URL if it is http(s) and holds nothing that could break out of an HTML attribute or a Markdown link
    (whitespace, quotes, angle brackets, control characters), its `user:password@` masked; else None."""
    if not url:
        return None
    url = url.strip()
    if not re.fullmatch(r"https?://[^\s\x00-\x1f\x7f<>\"`]+", url, re.IGNORECASE):
        return None
    return mask_credentials(url)


def markdown_safe(text: str) -> str:
    """Text for a Markdown or plain-text client: unsafe constructs neutralised by backslash escapes, credentials
    in URLs masked, everything else unchanged."""
    masked = _Pass(_plan_mask, _render_mask).feed(text, final=True)
    return _Pass(_plan_rules, _render_markdown).feed(masked, final=True)


def plain_safe(text: str) -> str:
    """Text for data formats read by other programs (BibTeX, RIS, CSL-JSON): each unsafe construct's active
    character dropped (no backslash, which BibTeX would read as a command), credentials in URLs masked."""
    return _whole(text, _render_plain)


def safe_fields(entry: Mapping[str, object]) -> dict[str, object]:
    """A record of the JSON contract (a citation, a retrieved paper) for clients: its text fields (title, quote)
    `markdown_safe`, its url http(s) only, ids and scores as they are (a client sends an id back)."""
    return {k: markdown_safe(v) if k in ("title", "quote") and isinstance(v, str)
            else safe_url(v if isinstance(v, str) else None) if k == "url" else v for k, v in entry.items()}


def safe_contract(data: dict[str, object]) -> dict[str, object]:
    """The JSON contract of an answer (`Answer.to_json`) as served to clients: answer and notice `markdown_safe`,
    citations and retrieved papers through `safe_fields`."""
    out = dict(data)
    for key in ("answer", "notice"):
        if isinstance(text := out.get(key), str):
            out[key] = markdown_safe(text)
    for key in ("citations", "retrieved"):
        if isinstance(entries := out.get(key), list):
            out[key] = [safe_fields(e) if isinstance(e, dict) else e for e in entries]
    return out


def html_safe(text: str) -> str:
    """Text for a Markdown renderer that accepts HTML (the chat): HTML-escaped, unsafe constructs' active
    characters as entities, credentials in URLs masked."""
    return _whole(text, _render_html)


def _whole(text: str, render: Render) -> str:
    # Unbounded: the chat and the exports take whole texts, nothing is held back.
    masked = mask_credentials(text)
    edits, _ = _plan_rules(masked, 0, True)
    return render(masked, 0, len(masked), edits)


class MarkdownStream:
    """`markdown_safe` over a text that arrives in pieces: `feed` returns what can be sent now, `close` the rest;
    the pieces joined equal `markdown_safe` of the whole."""

    def __init__(self) -> None:
        self._mask = _Pass(_plan_mask, _render_mask)
        self._rules = _Pass(_plan_rules, _render_markdown)

    def feed(self, piece: str) -> str:
        """The sanitised text that no later piece can change (an unfinished construct is held back)."""
        return self._rules.feed(self._mask.feed(piece))

    def close(self) -> str:
        """Everything still held back, decided as the end of the text."""
        return self._rules.feed(self._mask.feed("", final=True), final=True)


class _Pass:
    """One rewriting pass over a growing text: `plan` finds edits and how far the text is decided."""

    def __init__(self, plan: Plan, render: Render) -> None:
        self.plan, self.render = plan, render
        self.text, self.done = "", 0

    def feed(self, piece: str, final: bool = False) -> str:
        self.text += piece
        edits, cut = self.plan(self.text, self.done, final)
        out = self.render(self.text, self.done, cut, edits)
        # Keep only the context later decisions look back at: `://` (3 characters) and a run of backslashes.
        keep = max(0, cut - 3)
        while keep > 0 and self.text[keep - 1] == "\\":
            keep -= 1
        self.text, self.done = self.text[keep:], cut - keep
        return out


# --- credentials ------------------------------------------------------------------------------------------
def _plan_mask(text: str, lo: int, final: bool) -> tuple[list[tuple[int, int]], int]:
    """Spans (start, end) of `user:password` after `://` from `lo` on, and how far the text is decided."""
    spans: list[tuple[int, int]] = []
    at = text.find("://", max(0, lo - 3))
    while at >= 0:
        start = at + 3
        if start >= lo:
            window = text[start:start + CREDENTIAL_WINDOW + 1]
            stop = next((i for i, ch in enumerate(window) if ch in "/@" or ch.isspace()), None)
            if stop is None and len(window) <= CREDENTIAL_WINDOW and not final:
                return spans, start  # the `@` may still come
            if stop and window[stop] == "@":
                spans.append((start, start + stop))
        at = text.find("://", at + 1)
    return spans, len(text)


def _render_mask(text: str, lo: int, hi: int, spans: list[tuple[int, int]]) -> str:
    out, at = [], lo
    for start, end in spans:
        out += [text[at:start], "***"]
        at = end
    out.append(text[at:hi])
    return "".join(out)


# --- images, raw HTML, unsafe links -----------------------------------------------------------------------
def _escaped(text: str, i: int) -> bool:
    """Whether text[i] follows an odd run of backslashes (CommonMark then reads it as a literal character)."""
    run = 0
    while i - run - 1 >= 0 and text[i - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _plan_rules(text: str, lo: int, final: bool) -> tuple[list[tuple[int, int]], int]:
    """Spans (one character each) of the active characters of unsafe constructs from `lo` on, and how far the
    text is decided (an undecided construct's first character: everything before it is final)."""
    edits: list[tuple[int, int]] = []
    n = len(text)
    for m in _CANDIDATE.finditer(text, lo):
        j = m.start()
        ch = text[j]
        if ch in "!<":
            if _escaped(text, j):
                continue
            if j + 1 >= n:
                if final:
                    continue
                return edits, j
            if ch == "!":
                unsafe = text[j + 1] == "["
            elif text[j + 1] not in "hH":
                unsafe = text[j + 1] in _HTML_START
            elif _AUTOLINK.match(text, j):
                unsafe = False  # an http(s) autolink, `<https://…>`
            elif not final and _AUTOLINK_OPEN.fullmatch(text, j):
                return edits, j  # may still become one
            else:
                unsafe = True
        else:  # `(` of `](`, `:` of `]:` (a reference definition): is the destination's scheme unsafe?
            if j == 0 or text[j - 1] != "]" or _escaped(text, j - 1):
                continue
            ended = n - (j + 1) < DEST_WINDOW
            if ended and not final:
                return edits, j
            unsafe = _unsafe_destination(text[j + 1:j + 1 + DEST_WINDOW], ended)
        if unsafe:
            edits.append((j, j + 1))
    return edits, n


def _unsafe_destination(window: str, ended: bool) -> bool:
    """Whether a link destination (the start of it, `window`; `ended`: the text ends within it) may have a
    scheme other than http(s), decoded as a renderer and a browser would: backslash escapes and entities
    decoded, tabs and line breaks dropped, leading spaces and control characters skipped. Undecidable within
    the window counts as unsafe."""
    i, n = 0, len(window)
    while i < n and window[i] in " \t\r\n":
        i += 1
    pointy = i < n and window[i] == "<"
    i += pointy
    scheme = ""
    while i < n:
        ch = window[i]
        if pointy and ch in ">\n" or not pointy and (ch == " " or ord(ch) < 0x20 or ch == "\x7f"):
            return False  # the destination ends before any `:`: no scheme, a relative link
        if ch == "\\" and i + 1 < n and window[i + 1] in _PUNCT:
            decoded, i = window[i + 1], i + 2
        elif ch == "\\" and i + 1 >= n and not ended:
            return True  # the next character (beyond the window) may be escaped
        elif ch == "&" and (entity := _ENTITY.match(window, i)):
            decoded, i = html.unescape(entity.group()), entity.end()
        elif ch == "&" and not ended and _ENTITY_OPEN.fullmatch(window, i):
            return True  # an entity cut by the window's end: undecidable
        else:
            decoded, i = ch, i + 1
        for c in decoded:
            if c in "\t\r\n" or not scheme and ord(c) <= 0x20:
                continue  # browsers drop these inside a URL, and skip them at its start
            if c == ":":
                return bool(scheme) and scheme.lower() not in SAFE_SCHEMES
            if c not in _SCHEME or not scheme and not c.isalpha():
                return False  # a character no scheme holds: a relative link
            scheme += c
    return not ended  # only scheme characters up to the window's end: undecidable


def _rewrite(text: str, lo: int, hi: int, edits: list[tuple[int, int]], active: Callable[[str], str],
             between: Callable[[str], str] = str) -> str:
    """text[lo:hi] with each edited (active) character replaced by `active(ch)`, the rest passed through
    `between`."""
    out, at = [], lo
    for j, _ in edits:
        out += [between(text[at:j]), active(text[j])]
        at = j + 1
    out.append(between(text[at:hi]))
    return "".join(out)


def _render_markdown(text: str, lo: int, hi: int, edits: list[tuple[int, int]]) -> str:
    return _rewrite(text, lo, hi, edits, lambda ch: "\\" + ch)  # a CommonMark backslash escape


def _render_plain(text: str, lo: int, hi: int, edits: list[tuple[int, int]]) -> str:
    return _rewrite(text, lo, hi, edits, lambda ch: "")


def _render_html(text: str, lo: int, hi: int, edits: list[tuple[int, int]]) -> str:
    return _rewrite(text, lo, hi, edits, _HTML_ENTITY.__getitem__, lambda part: html.escape(part, quote=False))
