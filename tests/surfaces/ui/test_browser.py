"""End to end in a real browser: Playwright driving Debian's chromium against `rag-bot serve`."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from rag_bot.surfaces.ui.history import STORAGE_KEY
from tests.surfaces.ui.test_app import running_server

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]
# `make screenshot` sets this to docs/screenshot.png; otherwise the screenshot stays in the test's tmp_path.
SCREENSHOT_ENV = "RAG_BOT_SCREENSHOT"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium (/usr/bin/chromium) is not installed; "
                       "`apt-get install chromium` (.ci/run does) to run the browser tests"),
]

# The last assistant message's text, recorded on every change, to see the answer arrive in pieces.
WATCH_STREAM = """() => {
  window.seenLengths = [];
  const chat = document.querySelector('#chat');
  new MutationObserver(() => {
    const bots = chat.querySelectorAll('.message.bot, [data-testid="bot"]');
    const last = bots[bots.length - 1];
    if (last) { window.seenLengths.push(last.innerText.length); }
  }).observe(chat, {subtree: true, childList: true, characterData: true});
}"""


@pytest.fixture(scope="module")
def app_url(seed_storage, tmp_path_factory):
    # The store as `make run` has it: `storage` in the server's working folder, so the status line (and
    # docs/screenshot.png) reads "folder storage", not a temporary path.
    workdir = tmp_path_factory.mktemp("browser-serve")
    shutil.copytree(seed_storage, workdir / "storage")
    with running_server(Path("storage"), workdir) as (url, _):
        yield url


@pytest.fixture(scope="module")
def page(app_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1440, "height": 1000}, accept_downloads=True)
        page = context.new_page()
        page.errors = []  # type: ignore[attr-defined]
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))  # type: ignore[attr-defined]
        page.goto(app_url)
        page.wait_for_selector("#question textarea", timeout=30000)
        yield page
        browser.close()


def ask(page, question: str) -> float:
    """Type a question and send it; returns seconds until the first answer text shows."""
    page.fill("#question textarea", question)
    start = time.perf_counter()
    page.click("#send")
    page.wait_for_function(
        "() => { const b = document.querySelectorAll('#chat .message.bot, #chat [data-testid=\"bot\"]');"
        " return b.length && b[b.length - 1].innerText.trim().length > 3 && b[b.length - 1].innerText.trim() !== '…'; }",
        timeout=30000,
    )
    return time.perf_counter() - start


def last_bot_text(page) -> str:
    return str(page.locator("#chat .message.bot, #chat [data-testid='bot']").last.inner_text())


def test_ask_streams_a_cited_answer_and_the_marker_opens_its_card(page, tmp_path):
    page.evaluate(WATCH_STREAM)
    first = ask(page, "what does CorrSteer gain on HarmBench?")
    page.wait_for_selector("#sources #src-1-1", timeout=30000)
    text = last_bot_text(page)
    assert "27.1" in text and "[1]" in text
    lengths = page.evaluate("window.seenLengths")
    final = len(text)
    # The question shows at once with a placeholder; the offline answer, written at once, then arrives whole
    # (a model's answer streams in pieces: at most one update per STREAM_EVERY).
    assert any(0 < n < final for n in lengths), f"something showed before the answer (saw {lengths[:8]}...)"
    print(f"\nfirst answer text after {first * 1000:.0f} ms")
    card = page.locator("#src-1-1")
    assert "CorrSteer" in card.inner_text()
    assert "27.1% on HarmBench" in card.locator("mark").inner_text()
    page.locator("#chat a.cite").first.click()
    page.wait_for_function("() => document.getElementById('src-1-1').classList.contains('flash')")
    assert card.is_visible()
    assert page.url.endswith("/"), "a marker does not navigate away"
    screenshot = Path(os.environ.get(SCREENSHOT_ENV) or tmp_path / "screenshot.png")
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(screenshot))
    assert screenshot.stat().st_size > 10_000
    assert "offline composer" in page.locator("#status").inner_text()


def test_follow_up_and_compare_mode(page):
    page.get_by_role("radio", name="Compare").check()
    ask(page, "CorrSteer and SARSteer")
    page.wait_for_selector("#sources #src-2-2", timeout=30000)
    table = page.locator("#chat table").last
    assert "Approach" in table.inner_text() and "SARSteer" in table.inner_text()
    # Answer 2 has its own cards; answer 1's stay, folded.
    assert page.locator("#src-1-1").count() == 1
    page.get_by_role("radio", name="Auto").check()


def test_export_downloads_the_conversation_as_markdown(page, tmp_path):
    with page.expect_download() as download:
        page.click("#export")
    path = tmp_path / "conversation.md"
    download.value.save_as(path)
    text = path.read_text()
    assert "## 1. what does CorrSteer gain on HarmBench?" in text and "**References**" in text
    assert "## 2. CorrSteer and SARSteer" in text


def test_references_download_as_bibtex(page, tmp_path):
    import bibtexparser

    with page.expect_download() as download:
        page.click("#cite-bibtex")
    assert download.value.suggested_filename == "rag-bot-references.bib"
    path = tmp_path / "references.bib"
    download.value.save_as(path)
    parsed = bibtexparser.parse_string(path.read_text(encoding="utf-8"))
    assert not parsed.failed_blocks and len(parsed.entries) >= 2
    titles = " ".join(e["title"] for e in parsed.entries)
    assert "CorrSteer" in titles and "SARSteer" in titles


def test_upload_then_a_hostile_abstract_shows_as_text(page, tmp_path):
    record = {
        "id": "xss-1",
        "title": "Quokkaformer <img src=x onerror=\"window.xssHit=1\">",
        "abstract": "We present Quokkaformer, a marsupial-inspired transformer for tabular anomaly detection. "
        "<script>window.xssHit=2</script> Quokkaformer flags anomalies with <img src=x onerror=\"window.xssHit=3\"> "
        "93% precision on the KDD-Cup benchmark while using a tenth of the parameters.",
        "venue": "ICML",
        "year": 2026,
        "url": "javascript:window.xssHit=4",
    }
    upload = tmp_path / "hostile.jsonl"
    upload.write_text(json.dumps(record) + "\n{not json}\n")
    page.get_by_role("tab", name="Collection").click()
    page.locator("#upload input[type=file]").set_input_files(str(upload))
    page.wait_for_function("() => document.querySelector('#upload').innerText.includes('hostile.jsonl')")
    start = time.perf_counter()
    page.click("#add")
    page.wait_for_function("() => document.querySelector('#upload-summary').innerText.includes('added')",
                           timeout=60000)
    print(f"\nupload of 1 paper shown after {(time.perf_counter() - start) * 1000:.0f} ms")
    summary = page.locator("#upload-summary").inner_text()
    assert "1 added" in summary and "hostile.jsonl:2: bad JSON" in summary
    page.fill("#search textarea, #search input", "Quokkaformer")
    page.click("#search-btn")
    page.wait_for_function("() => document.querySelector('#papers-table').innerText.includes('onerror')",
                           timeout=15000)
    page.wait_for_function("() => document.querySelector('#papers-caption').innerText.includes('1 paper matches')",
                           timeout=15000)
    page.get_by_role("tab", name="Chat").click()
    page.click("#new-chat")
    page.wait_for_function("() => !document.querySelector('#sources .src-card')")
    ask(page, "What precision does Quokkaformer reach?")
    page.wait_for_selector("#sources #src-1-1", timeout=30000)
    card = page.locator("#src-1-1").inner_text()
    assert "<script>window.xssHit=2</script>" in card and 'onerror="window.xssHit=3"' in card
    assert "<img" in page.locator("#src-1-1 .src-title").inner_text()
    assert page.locator("#sources img, #sources script, #chat img[src='x']").count() == 0
    assert page.locator("#src-1-1 a[href^='javascript']").count() == 0
    assert page.evaluate("window.xssHit") is None, "nothing from the abstract ran"


MAP_SCREENSHOT_ENV = "RAG_BOT_MAP_SCREENSHOT"  # `make screenshot` sets it to docs/map.png


def test_the_map_names_its_topics_titles_its_points_and_opens_a_paper(page, tmp_path):
    """The Map tab: topic names on the drawing, no axes, the last answer's sources as stars, a paper's title on
    hover, its card on click, and a button that asks about it in the chat."""
    page.get_by_role("tab", name="Map").click()
    page.wait_for_selector("#map svg circle", timeout=30000)
    names = page.evaluate("() => [...document.querySelectorAll('#map .topic-name')].map(t => t.textContent)")
    legend = page.locator("body").inner_text()
    assert names and all(name in legend for name in names), (names, legend[:300])
    assert page.locator("#map .tick, #map [class*=axis]").count() == 0
    # The earlier tests' last answer cited papers: they are drawn as stars, with their titles.
    page.wait_for_selector("#map path.cited", timeout=15000)
    point = page.locator("#map circle").nth(3)
    hover = point.locator("title").text_content()
    title = hover.split(" · ")[0]
    assert title in {t for t in page.evaluate("() => [...document.querySelectorAll('#map circle title')]"
                                               ".map(t => t.textContent.split(' · ')[0])")}
    point.dispatch_event("click")
    page.wait_for_selector("#map .map-card .src-title", timeout=15000)
    assert page.locator("#map .map-card .src-title").inner_text() == title
    assert len(page.locator("#map .map-card .src-abstract").inner_text()) > 100
    shot = Path(os.environ.get(MAP_SCREENSHOT_ENV) or tmp_path / "map.png")
    page.locator("#map").screenshot(path=str(shot))
    page.locator("#map .map-ask").click()
    page.wait_for_function("() => document.querySelector('#question textarea').value.startsWith('Tell me about ')",
                           timeout=10000)
    assert page.locator("#question textarea").input_value() == f"Tell me about {title}"
    assert page.locator("#question textarea").is_visible()  # back on the Chat tab
    page.locator("#question textarea").fill("")
    assert page.evaluate("window.xssHit") is None


def test_images_in_an_abstract_never_load(page, tmp_path):
    """A Markdown image or an <img> planted in an abstract makes the reader's browser fetch nothing."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits: list[str] = []

    class Record(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    spy = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=spy.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{spy.server_address[1]}"
    try:
        record = {
            "id": "img-1",
            "title": "Numbatnet: termite-inspired sparse retrieval",
            "abstract": f"We present Numbatnet, a termite-inspired sparse retriever. Numbatnet reaches 71% recall "
                        f"![pixel]({base}/md.png) on the BEIR benchmark <img src=\"{base}/raw.png\"> with a tenth "
                        f"of the memory.",
        }
        upload = tmp_path / "images.jsonl"
        upload.write_text(json.dumps(record) + "\n")
        page.get_by_role("tab", name="Collection").click()
        page.locator("#upload input[type=file]").set_input_files(str(upload))
        page.wait_for_function("() => document.querySelector('#upload').innerText.includes('images.jsonl')")
        page.click("#add")
        page.wait_for_function("() => document.querySelector('#upload-summary').innerText.includes('1 added')",
                               timeout=60000)
        page.get_by_role("tab", name="Chat").click()
        page.click("#new-chat")
        page.wait_for_function("() => !document.querySelector('#sources .src-card')")
        page.fill("#question textarea", f"What recall does Numbatnet reach? ![q]({base}/question.png)")
        page.click("#send")
        page.wait_for_selector("#sources #src-1-1", timeout=30000)
        page.wait_for_timeout(1500)
        assert hits == [], f"the browser fetched {hits}"
        assert "Numbatnet" in page.locator("#src-1-1").inner_text()
        assert "pixel" in last_bot_text(page), "the answer quotes the sentence with the image syntax, as text"
        assert page.locator(f"img[src^='{base}']").count() == 0
    finally:
        spy.shutdown()


def test_a_conversation_survives_a_reload_reopens_and_deletes(page, app_url):
    page.locator("#conversations").get_by_text("Conversations").first.click()  # unfold the list
    page.click("#new-chat")
    page.wait_for_function("() => !document.querySelector('#sources .src-card')")
    before = page.evaluate(f"() => localStorage.getItem('{STORAGE_KEY}')")
    ask(page, "what does CorrSteer gain on HarmBench?")
    page.wait_for_selector("#sources #src-1-1", timeout=30000)
    page.wait_for_selector("#chat a.permalink", timeout=30000)
    permalink = page.locator("#chat a.permalink").last.get_attribute("href") or ""
    assert permalink.startswith("answer/")
    # Saved: the list (updated with the browser's copy of the conversation id) names it.
    page.wait_for_function("() => document.querySelector('#conversation-list').textContent"
                           ".includes('what does CorrSteer gain on HarmBench?')", timeout=15000)
    # ... and the browser has stored the new conversation's id (Gradio writes its BrowserState to localStorage after
    # the event that set it: a reload in between reopened the previous conversation, once in a full run).
    page.wait_for_function(f"(before) => localStorage.getItem('{STORAGE_KEY}') !== before", arg=before,
                           timeout=15000)

    page.reload()
    page.wait_for_selector("#sources #src-1-1", timeout=30000)  # the source cards are back ...
    assert "27.1" in last_bot_text(page) and page.locator("#chat a.cite").count() >= 1  # ... and the answer
    assert "what does CorrSteer gain on HarmBench?" in page.locator("#chat").inner_text()
    assert "CorrSteer" in page.locator("#src-1-1").inner_text()

    shared = page.request.get(app_url + permalink)
    assert shared.status == 200 and "27.1" in shared.text() and "References" in shared.text()
    assert "<script" not in shared.text().lower()
    assert page.request.get(app_url + "answer/not-a-token").status == 404

    page.locator("#conversations").get_by_text("Conversations").first.click()
    named = page.locator("#conversation-list label").filter(has_text="what does CorrSteer gain on HarmBench?")
    item = named.first  # the newest (an earlier test may have asked the same)
    item.wait_for(timeout=15000)
    before = named.count()
    page.click("#new-chat")
    page.wait_for_function("() => !document.querySelector('#sources .src-card')")
    item.click()  # reopen
    page.wait_for_selector("#sources #src-1-1", timeout=30000)
    assert "27.1" in last_bot_text(page)

    page.click("#delete-conversation")
    page.wait_for_function("() => !document.querySelector('#sources .src-card')", timeout=15000)
    page.wait_for_function("(n) => [...document.querySelectorAll('#conversation-list label')].filter("
                           "l => l.innerText.includes('what does CorrSteer gain on HarmBench?')).length === n",
                           arg=before - 1, timeout=15000)
    assert page.request.get(app_url + permalink).status == 404, "deleting removes the permalinks too"
    page.reload()
    page.wait_for_selector("#question textarea", timeout=30000)
    page.wait_for_timeout(1000)
    assert page.locator("#sources .src-card").count() == 0, "a deleted conversation does not come back"
