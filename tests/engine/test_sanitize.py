"""The shared sanitiser: what a real Markdown renderer (markdown-it, raw HTML on, every link scheme accepted: the
most permissive client) makes of sanitised hostile text, and the streamed form against the whole."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from rag_bot.sanitize import MarkdownStream, html_safe, markdown_safe, safe_url

HOSTILE = (
    "See ![x](http://127.0.0.1:9/p.png) and ![y][r] then <img src=x onerror=alert(1)> "
    "[click](javascript:alert(1)) <javascript:alert(2)> <!-- hidden --> <script>alert(3)</script>\n\n"
    "[r]: javascript:alert(4)\n"
)
# Pieces hostile texts are made of: the openers of each construct, scheme spellings a browser accepts (case,
# entities, escapes, tabs), credentials, and the text around them.
FRAGMENTS = [
    "![", "!", "[", "]", "](", "]:", "(", ")", "<", ">", "</", "<!--", "<?", "img src=x onerror=alert(1)", "script",
    "javascript:", "JaVaScRiPt:", "java&#115;cript:", "javascript&colon;", "java\tscript:", "java\\:", "vbscript:",
    "data:text/html,x", "&#106;", "&Tab;", "&", ";", "\\", "\\\\", "http://", "https://", "<https://e.org>",
    "user:pw@", "@", "/", ":", "//", " ", "\n", "\n\n", "\t", "a", "h", "x", "[1]", "e.org", "\"t\"", "'", "`",
]
# Link destinations spelt every way a renderer decodes them, in every form a link takes.
DEST_PIECES = [
    "j", "a", "v", "s", "c", "r", "i", "p", "t", "h", ":", "//", "x", "javascript", "JAVASCRIPT", "vbscript", "data",
    "http", "https", "&#106;", "&#x6A;", "&colon;", "&#58;", "&#x3a;", "&Tab;", "&NewLine;", "&#0;", "&", "%6A",
    "\t", "\n", " ", "\x01", "\\", "\\:", "\\!", "\\[", "<", ">", "(", ")", "[", "]", "!",
]
LINK_FORMS = [
    "[a]({})", "[a]( {} )", "[a](<{}>)", "[a]({} \"t\")", "![a]({})", "[![a]({})]({})", "<{}>",
    "[r]: {}\n\n[r]", "[r]:\n{}\n\n[a][r]", "- [r]: {}\n\n[r]", "> [r]: {}\n\n[r]",
]
link_texts = st.builds(
    lambda form, dest, pad: pad + form.replace("{}", dest),
    st.sampled_from(LINK_FORMS), st.lists(st.sampled_from(DEST_PIECES), max_size=12).map("".join),
    st.sampled_from(["", "x ", "java" * 20, "\\" * 7, "&" * 9]),
)
hostile_texts = st.one_of(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join), link_texts)


def _renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    md.validateLink = lambda url: True  # a client that trusts every link: the sanitiser alone must make it safe
    return md


MD = _renderer()


def _scheme(href: str) -> str | None:
    """The scheme a browser reads in a link's URL (markdown-it has decoded its entities and escapes already)."""
    url = re.sub(r"[\t\n\r]", "", href).lstrip("".join(map(chr, range(0x21))))
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", url)
    return m.group(1).lower() if m else None


def unsafe_constructs(markdown: str) -> list[str]:
    """What a permissive renderer would make active in a Markdown text: images, raw HTML, non-http(s) links."""
    found = []
    for token in MD.parse(markdown):
        for t in [token, *(token.children or [])]:
            if t.type in ("image", "html_inline", "html_block"):
                found.append(f"{t.type}: {t.content or t.attrs}")
            elif t.type == "link_open" and _scheme(str(t.attrs.get("href", ""))) not in (None, "http", "https"):
                found.append(f"link: {t.attrs['href']}")
    return found


def streamed(text: str, cuts: list[int]) -> tuple[str, list[str]]:
    stream = MarkdownStream()
    bounds = [0, *sorted(c % (len(text) + 1) for c in cuts), len(text)]
    out = [stream.feed(text[a:b]) for a, b in zip(bounds, bounds[1:])]
    out.append(stream.close())
    return "".join(out), out


def test_hostile_abstract_is_neutralised_for_markdown_clients():
    assert unsafe_constructs(HOSTILE)  # the renderer does see them
    safe = markdown_safe(HOSTILE)
    assert unsafe_constructs(safe) == []
    rendered = MD.render(safe)
    assert "<img" not in rendered and "<script" not in rendered and "javascript:" not in re.sub(
        r">[^<]*<", "><", rendered)  # no javascript: anywhere but in text
    assert 'href="http://127.0.0.1:9/p.png"' in rendered  # the image became a plain link, loading nothing


def test_ordinary_text_and_http_links_pass_unchanged():
    for text in ("x < y and y > z, p<0.05, a & b", "Sparse steering [1] beats [2].", "[paper](https://e.org/a_(b))",
                 "<https://e.org/x>", "Wow! [1]", "[1]: https://e.org/ref", "see [2](#ref) or 3 < 4 > 2",
                 "a\\b", "`code`", "**bold** and _it_", "| a | b |\n|---|---|\n| 1 | 2 |"):
        assert markdown_safe(text) == text, text


def test_each_construct_is_escaped_at_its_one_active_character():
    assert markdown_safe("![x](http://e/p.png)") == "\\![x](http://e/p.png)"
    assert markdown_safe("<img src=x onerror=alert(1)>") == "\\<img src=x onerror=alert(1)>"
    assert markdown_safe("[x](javascript:alert(1))") == "[x]\\(javascript:alert(1))"
    assert markdown_safe("[x]( <java&#115;cript:1>)") == "[x]\\( \\<java&#115;cript:1>)"
    assert markdown_safe("[r]: vbscript:x") == "[r]\\: vbscript:x"
    assert markdown_safe("[x](data:text/html,hi)") == "[x]\\(data:text/html,hi)"
    assert markdown_safe("log in at http://ann:s3cret@db.example/") == "log in at http://***@db.example/"
    assert markdown_safe("\\![x](u)") == "\\![x](u)"  # already escaped: left alone (no `\\\\!`, which is an image)


def test_html_form_escapes_everything_and_the_active_characters():
    out = html_safe(HOSTILE + " http://a:b@h/")
    assert "<" not in out and "![" not in out and "](javascript" not in out and "]: javascript" not in out
    assert "&#33;[x]" in out and "[click]&#40;javascript" in out and "[r]&#58; javascript" in out
    assert "a:b@" not in out


def test_safe_url_keeps_http_only():
    assert safe_url("https://e.org/x") == "https://e.org/x" and safe_url(" HTTP://e.org ") == "HTTP://e.org"
    for bad in ("javascript:alert(1)", "data:text/html,x", "//e.org", "https://e.org/\" onmouseover=x", "", None,
                "https://e.org/a b", "ftp://e.org"):
        assert safe_url(bad) is None, bad
    assert safe_url("https://ann:pw@e.org/") == "https://***@e.org/"
    assert safe_url("https://en.wikipedia.org/wiki/Hilbert's_(problems)") is not None


@settings(max_examples=400, deadline=None)
@given(hostile_texts)
@example(HOSTILE)
@example("[x](&Tab;" * 20 + "javascript:alert(1))")
def test_no_hostile_text_renders_anything_active(text):
    safe = markdown_safe(text)
    assert unsafe_constructs(safe) == [], safe
    assert markdown_safe(safe) == safe  # idempotent: sanitising twice (a References line, then the whole) is safe


@settings(max_examples=400, deadline=None)
@given(hostile_texts, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
@example(HOSTILE, list(range(len(HOSTILE))))
def test_pieces_sanitise_to_the_same_text_as_the_whole(text, cuts):
    joined, pieces = streamed(text, cuts)
    assert joined == markdown_safe(text)


@given(st.integers(min_value=0, max_value=200))
def test_a_stray_opener_holds_the_stream_only_briefly(pad):
    from rag_bot.sanitize import CREDENTIAL_WINDOW, DEST_WINDOW

    for opener in ("[x](", "[r]:", "http://", "<h", "!", "<"):
        stream = MarkdownStream()
        stream.feed(opener + "a" * pad)
        rest = stream.close()  # what was held back
        assert len(rest) <= max(DEST_WINDOW, CREDENTIAL_WINDOW) + len(opener) + 1, (opener, rest)
        if pad > max(DEST_WINDOW, CREDENTIAL_WINDOW):
            assert rest == "", opener


def test_the_json_contract_is_served_with_nothing_active():
    """`/ask` (the chat's JSON API) serves `Answer.to_json()` to clients that may render it."""
    from markdown_it import MarkdownIt

    from rag_bot.sanitize import safe_contract
    from rag_bot.types import Answer, Citation

    hostile = "Glow ![t](http://127.0.0.1:9/t.png) <img src=x onerror=alert(1)> [c](javascript:alert(1)) [1]."
    answer = Answer(question="q", mode="ask", answer=hostile, grounded=True,
                    citations=[Citation(n=1, doc_id="h#1", title=hostile, source="h.jsonl", quote=hostile)],
                    retrieved=[{"doc_id": "h#1", "score": 0.5, "title": hostile, "url": "javascript:alert(4)"}])
    data = safe_contract(answer.to_json())
    texts = [data["answer"], data["citations"][0]["title"], data["citations"][0]["quote"], data["retrieved"][0]["title"]]
    for text in texts:
        page = MarkdownIt("commonmark", {"html": True}).render(text)
        assert "<img" not in page and 'href="javascript' not in page and "Glow" in page, page
    assert data["citations"][0]["doc_id"] == "h#1" and data["retrieved"][0]["url"] is None and "[1]" in data["answer"]

