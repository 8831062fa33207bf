"""The chat: rendering helpers, then the real server (`rag-bot serve`) driven through its Gradio API."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from rag_bot import answer_words as words
from rag_bot.surfaces.ui import auth_pairs, check_upload
from rag_bot.surfaces.ui.render import (
    answer_html,
    answer_markdown,
    answer_message,
    chosen_mode,
    cited_ids,
    example_prompts,
    export_markdown,
    highlight_quote,
    map_legend,
    paper_place,
    paper_rows,
    paper_table,
    safe_url,
    source_cards,
    sources_panel,
    status_line,
    table_caption,
    upload_summary,
)
from rag_bot.types import Answer, Citation, Paper, Turn
from tests.conftest import free_port, paper_with, serving

RAG_BOT = str(Path(sys.executable).parent / "rag-bot")
XSS = '<script>window.xssHit = 1</script> <img src=x onerror="window.xssHit = 2">'


# --- rendering --------------------------------------------------------------------------------------


def _answer(text: str, quote: str, doc_id: str = "x#1") -> Answer:
    return Answer(question="q", mode="ask", answer=text, grounded=True, retrieved=[],
                  citations=[Citation(n=1, doc_id=doc_id, title="T <b>", source="f.jsonl", quote=quote)])


def test_answer_markers_link_to_their_cards_and_html_is_escaped() -> None:
    out = answer_html("Uses <img src=x onerror=alert(1)> well [1], and [2].", turn=3)
    assert '<a class="cite" href="#src-3-1">[1]</a>' in out and 'href="#src-3-2"' in out
    assert "<img" not in out and "&lt;img src=x onerror=alert(1)&gt;" in out


def test_source_card_escapes_the_abstract_then_marks_the_quote() -> None:
    text = f"First sentence here. {XSS} is the payload. Last one."
    paper = Paper(doc_id="x#1", title="T <b>", text=text, source="f.jsonl", url="javascript:alert(1)", year=2025)
    card = source_cards(_answer("a [1]", f"{XSS} is the payload."), {"x#1": paper}, turn=1)
    assert 'id="src-1-1"' in card
    assert "<script>" not in card and "<img" not in card and "<b>" not in card
    assert "<mark>&lt;script&gt;window.xssHit = 1&lt;/script&gt;" in card
    assert "javascript:" not in card, "only http(s) links"
    assert "2025" in card and "f.jsonl" in card
    # A quote that is not verbatim still highlights its sentence.
    assert "<mark>Last one.</mark>" in highlight_quote(text, "last one")


def test_export_has_questions_answers_and_references() -> None:
    paper = Paper(doc_id="x#1", title="Title", text="Some text.", source="f.jsonl", url="https://e.org/1")
    md = export_markdown([Turn(question="what is x?", answer=_answer("x is y [1].", "Some text."))], {"x#1": paper})
    assert md.startswith("# rag-bot conversation")
    assert "## 1. what is x?" in md and "x is y [1]." in md
    assert "1. T \\<b> (f.jsonl · x#1) https://e.org/1" in md and "> Some text." in md


def test_the_exported_and_copied_markdown_keep_nothing_active() -> None:
    """The export file and the clipboard text open in Markdown viewers: an image, raw HTML or a javascript: link
    from an abstract or a model must not become active there, and a javascript: paper URL is left out."""
    from markdown_it import MarkdownIt

    hostile = ("Glow ![px](http://127.0.0.1:9/t.png) <img src=x onerror=alert(1)> "
               "[click](javascript:alert(document.cookie)) [1].")
    paper = Paper(doc_id="x#1", title="T <script>x</script>", text="t", source="f.jsonl", url="javascript:alert(4)")
    answer = _answer(hostile, hostile)
    for text in (export_markdown([Turn(question=hostile, answer=answer)], {"x#1": paper}), answer_markdown(answer)):
        page = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)
        assert "<img" not in page and "<script" not in page and 'href="javascript' not in page, page
        assert "javascript:alert(4)" not in text and "Glow" in page and "[1]" in page


def test_status_line_names_the_writer(engine) -> None:
    assert "Answers by **offline composer** · **38** papers indexed · store: " in status_line("offline", 38, "x")
    assert status_line("gpt-x", 3, "chroma <a>").startswith("Answers by **gpt-x** · **3** papers")
    assert "chroma &lt;a&gt;" in status_line("gpt-x", 3, "chroma <a>")
    assert "<b>" not in status_line("<b>model</b>", 1, "s")
    # The engine says who writes; the chat's default (offline) engine is the offline composer.
    assert engine.writer_name == "offline"


def test_logins_from_rag_bot_auth(tmp_path) -> None:
    assert auth_pairs(None) is None
    assert auth_pairs("ann:se:cret") == [("ann", "se:cret")]
    logins = tmp_path / "logins"
    logins.write_text("# team\nann:one\n\nbob:two\n")
    assert auth_pairs(str(logins)) == [("ann", "one"), ("bob", "two")]
    with pytest.raises(ValueError):
        auth_pairs("no-password-here")


def test_uploads_are_checked_for_type_and_size(tmp_path) -> None:
    ok = tmp_path / "a.csv"
    ok.write_text("id,title,abstract\n")
    assert check_upload(ok, 1) is None
    pdf = tmp_path / "paper.pdf"
    pdf.write_text("%PDF")
    assert "not a corpus file type" in (check_upload(pdf, 1) or "")
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    assert "over the 1 MB limit" in (check_upload(big, 1) or "")


def test_example_prompts_come_from_the_collection_one_per_mode(engine) -> None:
    from rag_bot.question import detect_mode
    from rag_bot.surfaces.collection_map import build_map

    papers = engine.index.all_papers()
    cmap = build_map(papers, engine.index.paper_vectors([p.doc_id for p in papers]))
    examples = example_prompts(cmap, {p.doc_id: p for p in papers})
    assert [mode for _, mode in examples] == ["Ask", "Summarize an area", "Compare", "Auto"]
    names = {a for p in papers for a in p.aliases}
    ask, summary, compare, _ = (q for q, _ in examples)
    assert any(n in ask for n in names) and detect_mode(ask) == "ask"
    assert detect_mode(summary) == "summary" and detect_mode(compare) == "compare"
    assert sum(n in compare for n in names) >= 2


def test_only_http_links_and_where_a_paper_is() -> None:
    assert safe_url("https://e.org/x") == "https://e.org/x" and safe_url("HTTP://e.org") == "HTTP://e.org"
    assert safe_url("javascript:alert(1)") is None and safe_url("") is None and safe_url(None) is None
    paper = Paper(doc_id="x#1", title="T", text="t", source="f.jsonl", venue="ICML", year=2026)
    assert paper_place(paper, "x#1", "f.jsonl") == "f.jsonl · x#1 · ICML 2026"
    assert paper_place(None, "x#1", "f.jsonl") == "f.jsonl · x#1"


def test_answer_message_and_clipboard_text() -> None:
    answer = _answer("It <works> [1].", "q")
    answer.notice = "The model failed; <offline> answer."
    message = answer_message(answer, turn=2)
    label, body = message.split("\n\n", 1)
    assert label == (f'<p class="certainty" data-certainty="{answer.certainty}">'
                     f"<strong>{words.certainty_label(answer.certainty)}</strong></p>"), "a plain label, in words"
    assert body.startswith('It &lt;works&gt; <a class="cite" href="#src-2-1">[1]</a>.')
    assert message.endswith("<em>The model failed; &lt;offline&gt; answer.</em>")
    assert answer_markdown(answer) == (f"It \\<works> [1].\n\n{words.certainty_line(answer.certainty)}\n\n"
                                       "References:\n[1] T \\<b> (f.jsonl, x#1)")
    answer.searched_for = "the question <spelled>"
    assert html.escape(words.SEARCHED_FOR.format(question="the question <spelled>")) in answer_message(answer, 2)


@pytest.mark.parametrize("certainty", ["confident", "tentative", "none"])
def test_every_certainty_is_shown_in_words_and_each_card_its_probability(certainty) -> None:
    answer = _answer("It works [1].", "q")
    answer.certainty = certainty
    answer.citations[0].probability = 0.42
    assert words.certainty_label(certainty) in answer_message(answer, turn=1)
    assert words.probability_text(0.42) in source_cards(answer, {}, 1)
    answer.citations[0].related = True
    assert words.MAY_BE_RELATED in source_cards(answer, {}, 1)


def test_sources_panel_lists_the_latest_answer_first_and_open() -> None:
    assert "Sources of the answers appear here" in sources_panel([], {})
    first = Turn(question="first <q>", answer=_answer("a [1]", "q", doc_id="a#1"))
    unsourced = _answer("nothing", "q")
    unsourced.citations = []
    second = Turn(question="second", answer=unsourced)
    panel = sources_panel([first, second], {})
    assert panel.index("Answer 2: second") < panel.index("Answer 1: first &lt;q&gt;")
    assert '<details class="turn-sources" open><summary>Answer 2' in panel
    assert '<details class="turn-sources"><summary>Answer 1' in panel
    assert "No sources: nothing in the collection matched." in panel and 'id="src-1-1"' in panel
    assert cited_ids([first]) == ["a#1"] and cited_ids([first, second]) == [] and cited_ids([]) == []


def test_modes_from_the_radio_or_the_api() -> None:
    assert chosen_mode("Auto") is None and chosen_mode("Summarize an area") == "summary"
    assert chosen_mode("compare") == "compare" and chosen_mode("nonsense") is None and chosen_mode(None) is None


def test_paper_table_search_needs_every_word() -> None:
    from rag_bot.surfaces.collection_map import build_map

    papers = {
        "b": Paper(doc_id="b", title="Slow", text="centralised tuning", source="s.csv"),
        "a": Paper(doc_id="a", title="Fast **LoRA**", text="federated tuning", source="s.csv", year=2025),
        "c": Paper(doc_id="c", title="First", text="tuning", source="r.csv", venue="ICML", year=2026),
    }
    cmap = build_map(list(papers.values()), {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]})
    rows = paper_rows(cmap, papers)
    assert paper_table(cmap, rows).values.tolist() == [
        ["First", "r.csv", "c", "ICML 2026"], ["Fast LoRA", "s.csv", "a", "2025"], ["Slow", "s.csv", "b", ""]
    ]
    assert paper_table(cmap, paper_rows(cmap, papers, "TUNING federated"))["ID"].tolist() == ["a"]
    assert paper_table(cmap, paper_rows(cmap, papers, "icml 2026"))["ID"].tolist() == ["c"]
    assert paper_table(cmap, paper_rows(cmap, papers, "quantum")).empty
    assert paper_table(cmap, rows, limit=2)["ID"].tolist() == ["c", "a"]


def test_the_table_caption_says_how_many_papers_and_how_many_are_shown() -> None:
    assert table_caption(38) == "38 papers" and table_caption(1) == "1 paper"
    assert table_caption(22186) == "Showing 200 of 22,186 papers; search to narrow"
    assert table_caption(320, "diffusion") == "320 papers match; showing the first 200"
    assert table_caption(7, "lora") == "7 papers match" and table_caption(1, "lora") == "1 paper matches"
    assert table_caption(0, "quantum") == "No paper matches"
    assert table_caption(12, "", limit=10) == "Showing 10 of 12 papers; search to narrow"


def test_upload_summary_counts_then_rejections() -> None:
    text = upload_summary(1, 2, 3, files=1, seconds=0.25, papers=40, rejected=["a.csv:3: bad <x>"])
    assert text.startswith("**1 added**, 2 updated, 3 skipped (already indexed, unchanged) from 1 file(s) in 0.2 s.")
    assert "now holds 40 papers" in text and "**1 rejected:**\n- a.csv:3: bad &lt;x&gt;" in text
    many = upload_summary(0, 0, 0, files=0, seconds=0, papers=1, rejected=[f"f{i}: no" for i in range(53)])
    assert "added" not in many and "- f49: no" in many and "f50" not in many and "… and 3 more" in many


def test_map_legend_names_and_counts_the_topics(engine) -> None:
    from rag_bot.surfaces.collection_map import build_map

    papers = list(engine.papers.values())
    cmap = build_map(papers, engine.index.paper_vectors([p.doc_id for p in papers]))
    legend = map_legend(cmap)
    assert legend.startswith("Topics (k-means") and legend.count("**") == 2 * len(cmap.labels)
    assert sum(int(n) for n in re.findall(r"\((\d+)\)", legend)) == len(papers)


def test_the_page_has_its_ids_and_api_names(engine) -> None:
    from rag_bot.surfaces.ui import build_app

    config = build_app(engine).get_config_file()
    ids = {c["props"].get("elem_id") for c in config["components"]}
    assert {"status", "chat", "question", "send", "mode", "papers", "new-chat", "copy", "export", "sources",
            "search", "search-btn", "papers-caption", "papers-table", "upload", "add", "upload-summary",
            "map"} <= ids
    names = {d.get("api_name") for d in config["dependencies"]}
    assert {"chat", "upload", "search", "ask"} <= names


class Sealed(Mapping[str, Paper]):
    """A collection of `n` papers none of which may be read: what is built from it comes from the map alone."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the papers were read")

    def __getitem__(self, doc_id: str) -> Paper:
        raise AssertionError(f"paper {doc_id} was read")


def test_a_collection_over_the_bounds_shows_a_bounded_table_and_map_built_from_the_map_alone(engine) -> None:
    """Past `TABLE_ROWS` papers the table shows the first ones and says how many there are, past `MAP_POINTS` the
    plot draws a sample and says so; neither reads a paper. A search still reaches every paper (here with the
    bounds at 10, below the 38 seeds)."""
    import gradio as gr

    from rag_bot.surfaces.ui.base import Library, Shared
    from rag_bot.surfaces.ui.chat import ChatPanel
    from rag_bot.surfaces.ui.collection import CollectionPanel
    from rag_bot.surfaces.ui.map import MapPanel
    from rag_bot.surfaces.ui.sources import SourcesPanel

    library = Library(engine)
    papers = library.papers
    library.papers = Sealed(len(papers))
    shared = Shared(status=gr.Markdown(), turns=gr.State([]))
    with gr.Blocks():
        collection = CollectionPanel(library, shared, table_rows=10)
        collection.render()
        plot = MapPanel(library, shared, map_points=10)
        plot.render()
    assert collection.caption.value == "Showing 10 of 38 papers; search to narrow"
    shown = [row[2] for row in collection.table.value["data"]]
    ordered = sorted(papers.values(), key=lambda p: (p.source, int(p.doc_id.rsplit("#", 1)[1])))  # #2 before #10
    assert shown == [p.doc_id for p in ordered[:10]]
    assert "· 10 of 38 papers shown" in plot.label.value
    assert sum(int(n) for n in re.findall(r"\((\d+)\)", plot.legend.value)) == 38  # the full counts

    library.papers = papers
    last = ordered[-1]  # far past the first 10 rows
    found = collection.search(f"{last.doc_id} {last.title.split()[0]}")
    assert found[collection.table]["ID"].tolist() == [last.doc_id] and found[collection.found][0] == 1
    assert len(collection.search("the")[collection.table]) == 10
    count, query = collection.search("the")[collection.found]
    assert count > 10 and table_caption(count, query, limit=10) == f"{count} papers match; showing the first 10"

    # The filters offer every venue and source of the collection, read from the map.
    with gr.Blocks():
        chat = ChatPanel(library, SourcesPanel(library), shared)
        chat.render()
    venues = sorted({p.venue for p in papers.values() if p.venue})
    assert [c[0] for c in chat.venue.choices] == ["", *venues]
    assert [c[0] for c in chat.source.choices] == ["", *sorted({p.source for p in papers.values()})]


def test_a_failed_answer_is_logged_with_its_traceback_and_the_user_sees_a_short_message(engine) -> None:
    import logging

    import gradio as gr

    from rag_bot.surfaces.ui.base import Library, Shared
    from rag_bot.surfaces.ui.chat import ChatPanel
    from rag_bot.surfaces.ui.sources import SourcesPanel

    class Broken:
        def __getattr__(self, name):
            return getattr(engine, name)

        def stream(self, *args, **kwargs):
            raise RuntimeError("boom")

    library = Library(engine)
    library.engine = Broken()  # type: ignore[assignment]
    with gr.Blocks():
        sources = SourcesPanel(library)
        chat = ChatPanel(library, sources, Shared(status=gr.Markdown(), turns=gr.State([])))
        chat.render()
        sources.render()
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("rag_bot.surfaces.ui.chat")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with pytest.warns(UserWarning, match=r"^Sorry, something went wrong while answering \(RuntimeError\)"):
            updates = list(chat.respond("secret question", [], [], "Auto", 6))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    # The chat shows the question, then takes it back and puts it in the box again; nothing else changes.
    assert set(updates[0]) == {chat.chatbot, chat.question} and updates[0][chat.question] == ""
    assert updates[-1] == {chat.chatbot: [], chat.question: "secret question"}
    errors = [r for r in records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info and "boom" in str(errors[0].exc_info[1])
    assert all("secret question" not in r.getMessage() for r in records if r.levelno >= logging.INFO)
    assert any("secret question" in r.getMessage() for r in records if r.levelno == logging.DEBUG)


# --- the real server --------------------------------------------------------------------------------


@contextmanager
def running_server(storage: Path, workdir: Path, **env_extra: str) -> Iterator[tuple[str, object]]:
    """`rag-bot serve` on a free port over `storage`; yields (url, log file); stopped on exit."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_BOT_", "OPENAI_"))}
    env.update(RAG_BOT_STORAGE=str(storage), RAG_BOT_PORT=str(port), RAG_BOT_HOST="127.0.0.1",
               GRADIO_ANALYTICS_ENABLED="False", **env_extra)
    log = (workdir / "serve.log").open("w+")
    proc = subprocess.Popen([RAG_BOT, "serve"], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"rag-bot serve exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(url + "config", timeout=2) as response:
                    if response.status == 200:
                        break
            except urllib.error.HTTPError:
                break  # answering (a login page or a 401 still means it is up)
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("rag-bot serve did not answer within 120 s")
            time.sleep(0.5)
        yield url, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


def copy_store(seed_storage: Path, tmp_path_factory) -> Path:
    """A private copy of the seed store, for tests that upload (the session store stays untouched)."""
    target = tmp_path_factory.mktemp("store-copy") / "store"
    shutil.copytree(seed_storage, target)
    return target


@pytest.fixture(scope="module")
def server(seed_storage, tmp_path_factory):
    """The chat over a copy of the seed store (this module uploads into it)."""
    storage = copy_store(seed_storage, tmp_path_factory)
    with running_server(storage, tmp_path_factory.mktemp("serve")) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    from gradio_client import Client

    return Client(server[0], verbose=False)


def chat(client, message: str, mode: str = "Auto", papers: int = 6) -> tuple[str, str, str]:
    """One question through the chat's own event: (answer text, sources panel HTML, status line)."""
    messages, _, sources, status, *_ = client.predict(message, [], mode, papers, api_name="/chat")
    reply = messages[-1]["content"]
    text = reply[0]["text"] if isinstance(reply, list) else reply
    return text, sources, status


def test_chat_answers_with_linked_citations_and_source_cards(client, engine):
    text, sources, status = chat(client, "what does CorrSteer gain on HarmBench?")
    assert '<a class="cite" href="#src-1-1">[1]</a>' in text and "27.1" in text
    corrsteer = paper_with(engine, "CorrSteer")
    card = re.search(r'<div class="src-card" id="src-1-1">.*?</div></div>', sources, re.S)
    assert card and corrsteer in card.group(0)
    assert "<mark>" in card.group(0) and "27.1% on HarmBench" in card.group(0)
    assert "offline composer" in status and "38" in status and "papers indexed" in status


@pytest.mark.parametrize(
    ("mode", "question", "expect"),
    [
        ("Ask", "how much faster is OServe?", "[1]"),
        ("Summarize an area", "federated LoRA fine-tuning", words.SUMMARY_CLOSE.format(count="", papers="papers match").strip()),
        ("Compare", "CorrSteer and SARSteer", "|---"),
    ],
)
def test_each_mode_from_the_radio(client, mode, question, expect):
    text, sources, _ = chat(client, question, mode)
    assert expect in text
    assert 'id="src-1-1"' in sources and 'id="src-1-2"' in sources or mode == "Ask"


def test_number_of_papers_limits_a_summary(client):
    _, few, _ = chat(client, "Summarize the work on large language models", "Summarize an area", papers=2)
    assert 'id="src-1-2"' in few and 'id="src-1-3"' not in few


def test_blank_question_is_a_warning_not_an_error(client, server):
    from gradio_client import utils

    messages, *_ = client.predict("   ", [], "Auto", 6, api_name="/chat")
    assert messages == [] or isinstance(messages, dict | type(utils))
    log = server[1]
    log.seek(0)
    assert "Traceback" not in log.read()


def test_out_of_collection_question_is_declined(client):
    text, sources, _ = chat(client, "How do I make a sourdough bread starter?")
    assert words.NOT_COVERED.split("{what}")[0] in text and "[1]" not in text
    assert words.certainty_label("none") in text
    assert "src-card" not in sources


def test_upload_reports_added_and_rejected_and_the_paper_is_answerable(client, tmp_path):
    from gradio_client import handle_file

    good = tmp_path / "extra.csv"
    good.write_text(
        "id,title,abstract,venue,year,authors,url\n"
        'zeb-1,ZebraStripe: striped attention for tabular forecasting,"We introduce ZebraStripe, a striped '
        "attention scheme that alternates row and column attention over tabular time series. ZebraStripe "
        'reduces forecasting error by 18% on the M5 benchmark.",ICML,2026,Ann Lee; Bo Chen,https://example.org/zeb\n'
        "zeb-2,,missing title here,,,,\n"
    )
    archive = tmp_path / "corpus.tar.gz"  # passes the browser's type filter (.gz), not ours
    archive.write_bytes(b"\x1f\x8b not really")
    start = time.perf_counter()
    summary, table, status, _ = client.predict([handle_file(good), handle_file(archive)], api_name="/upload")
    seconds = time.perf_counter() - start
    assert "**1 added**" in summary
    assert "extra.csv:3: missing field 'title'" in summary
    assert "corpus.tar.gz: not a corpus file type" in summary
    assert "39** papers indexed" in status
    assert ["ZebraStripe: striped attention for tabular forecasting", "extra.csv", "zeb-1", "ICML 2026"] in table["data"]
    assert seconds < 30
    result = client.predict("how much does ZebraStripe reduce forecasting error?", "Auto", 0, api_name="/ask")
    assert result["citations"][0]["doc_id"] == "zeb-1" and "18%" in result["answer"]
    text, sources, _ = chat(client, "What is ZebraStripe?")
    assert "example.org/zeb" in sources and "ICML 2026" in sources


def test_upload_of_another_file_type_is_refused(client, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    pdf = tmp_path / "notes.pdf"
    pdf.write_bytes(b"%PDF-1.4")
    with pytest.raises(AppError, match="Invalid file type"):
        client.predict([handle_file(pdf)], api_name="/upload")


def test_an_upload_reusing_a_stored_id_replaces_nothing(client, tmp_path):
    """Any chat user's upload used to write over a paper someone else added, by reusing its id ("1 updated")."""
    from gradio_client import handle_file

    seed = "000_9ecb01dab6d44e76#1"  # the seeds' Het-CPFLoRA
    planted = tmp_path / "planted.csv"
    planted.write_text(f'id,title,abstract\n{seed},Het-CPFLoRA,"Het-CPFLoRA is a scam: it was never trained."\n')
    summary, table, status, _ = client.predict([handle_file(planted)], api_name="/upload")
    assert "**0 added**, 0 updated" in summary
    assert "is already in the collection; not replaced" in summary and "9ecb01dab6d44e76" in summary
    result = client.predict("what does Het-CPFLoRA decouple LoRA into?", "Auto", 0, api_name="/ask")
    assert result["citations"][0]["doc_id"] == seed and "scam" not in json.dumps(result)


def test_search_filters_the_paper_table(client):
    table = client.predict("LoRA federated", api_name="/search")
    titles = [row[0] for row in table["data"]]
    assert titles and all("LoRA" in t or "lora" in t.lower() for t in titles) and len(titles) < 38
    assert len(client.predict("", api_name="/search")["data"]) >= 38  # the seeds: every one, under the bound


def test_api_ask_speaks_the_json_contract(client):
    result = client.predict("Compare CorrSteer and SARSteer", "Compare", 0, api_name="/ask")
    assert result["mode"] == "compare" and result["grounded"] and len(result["citations"]) == 2
    assert json.dumps(result)


def test_login_is_required_when_auth_is_set(seed_storage, tmp_path):
    from gradio_client import Client

    with running_server(seed_storage, tmp_path, RAG_BOT_AUTH="ann:s3cret") as (url, _):
        with pytest.raises(Exception):  # noqa: B017 (gradio_client raises a plain ValueError / HTTP error)
            Client(url, verbose=False)
        client = Client(url, auth=("ann", "s3cret"), verbose=False)
        result = client.predict("what does CorrSteer gain on HarmBench?", "Auto", 0, api_name="/ask")
        assert result["citations"]


def test_login_attempts_are_throttled_over_http(seed_storage, tmp_path):
    """After 5 wrong passwords for a user from one client, even the right one is refused for a while."""
    import urllib.parse

    def login(url: str, password: str) -> int:
        data = urllib.parse.urlencode({"username": "ann", "password": password}).encode()
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "login", data=data), timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    with running_server(seed_storage, tmp_path, RAG_BOT_AUTH="ann:s3cret") as (url, log):
        assert login(url, "s3cret") == 200
        assert [login(url, f"wrong{i}") for i in range(5)] == [400] * 5
        assert login(url, "s3cret") == 400, "locked out: the right password is not even checked"
        log.seek(0)
        assert "failed logins for 'ann'" in log.read()


# --- in-process server (an engine whose answers and ingests can be held) -----------------------------------


class GatedEngine:
    """The engine, except that a question containing "slowly" and every ingest wait for `gate`."""

    def __init__(self, engine) -> None:
        import threading

        self._engine = engine
        self.gate = threading.Event()
        self.answering = threading.Event()
        self.ingesting = threading.Event()
        self.ingested: list[Path] = []

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def stream(self, question, *args, **kwargs):
        if "slowly" in question:
            self.answering.set()
            self.gate.wait(20)
        yield from self._engine.stream(question, *args, **kwargs)

    def ingest(self, paths, **kwargs):
        self.ingested += list(paths)
        self.ingesting.set()
        self.gate.wait(20)
        return self._engine.ingest(paths, **kwargs)


@pytest.fixture(scope="module")
def gated(seed_storage, tmp_path_factory):
    """(client url, GatedEngine, Library) of a chat served in this process over a copy of the seed store."""
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.surfaces.ui.app import build_app, launch
    from rag_bot.surfaces.ui.base import Library

    settings = Settings(storage=copy_store(seed_storage, tmp_path_factory), host="127.0.0.1", port=free_port())
    engine = GatedEngine(Engine(settings))
    engine.retriever  # noqa: B018
    library = Library(engine)  # type: ignore[arg-type]
    app = build_app(engine, library)  # type: ignore[arg-type]
    launch(app, settings, prevent_thread_lock=True, quiet=True)
    try:
        yield f"http://127.0.0.1:{settings.port}/", engine, library
    finally:
        engine.gate.set()
        app.close()


def test_a_slow_answer_or_an_upload_never_blocks_other_answers(gated, tmp_path):
    from gradio_client import Client, handle_file

    url, engine, _ = gated
    slow_user, other_user = Client(url, verbose=False), Client(url, verbose=False)
    slow = slow_user.submit("slowly: what does CorrSteer gain on HarmBench?", [], "Auto", 6, api_name="/chat")
    assert engine.answering.wait(30)
    result = other_user.predict("what does CorrSteer gain on HarmBench?", "Auto", 0, api_name="/ask")
    assert result["citations"] and not slow.done(), "answered while the slow answer is still being written"

    upload = tmp_path / "more.csv"
    upload.write_text('id,title,abstract\nwomb-1,Wombatnet,"We introduce Wombatnet, a burrowing index that '
                      'speeds up nearest-neighbour search by 7x on SIFT1M."\n')
    uploading = slow_user.submit([handle_file(upload)], api_name="/upload")
    assert engine.ingesting.wait(30)
    result = other_user.predict("how much faster is OServe?", "Auto", 0, api_name="/ask")
    assert result["citations"] and not uploading.done(), "answered from the committed state during the upload"
    deadline = time.monotonic() + 30
    while not any(str(o[0]).startswith("Indexing") for o in uploading.outputs()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert str(uploading.outputs()[0][0]).startswith("Indexing 1 file(s)…"), "the upload says at once it is indexing"

    engine.gate.set()
    summary, table, status, _ = uploading.result(timeout=60)
    assert "**1 added**" in summary and "39** papers indexed" in status
    assert slow.result(timeout=60)[0][-1]["content"]
    assert engine.ingested and not any(p.exists() for p in engine.ingested), "uploaded temp files are removed"
    assert other_user.predict("how much does Wombatnet speed up search?", "Auto", 0, api_name="/ask")["citations"]


def test_exports_keep_one_file_per_session(gated):
    from gradio_client import Client

    url, _, library = gated
    before = {p for p in library.export_dir.rglob("*") if p.is_file()}
    for _ in range(2):
        client = Client(url, verbose=False)
        for question in ("what does CorrSteer gain on HarmBench?", "how much faster is OServe?"):
            *_, export, _ = client.predict(question, [], "Auto", 6, api_name="/chat")
            assert export, "each answer can be exported"
    files = [p for p in library.export_dir.rglob("*") if p.is_file() and p not in before]
    sessions = {p.parent for p in files}
    assert len(sessions) == 2, files
    names = {"rag-bot-conversation.md", "rag-bot-references.bib", "rag-bot-references.ris",
             "rag-bot-references.json"}
    for folder in sessions:
        assert {p.name for p in folder.iterdir()} == names, "one file of each kind per session, overwritten"


def test_chat_offers_the_cited_papers_as_bibtex_ris_and_csl(gated):
    """After an answer the reference downloads hold the conversation's cited papers, readable by real parsers,
    with unique keys and each paper's doc_id."""
    import bibtexparser
    import rispy
    from gradio_client import Client

    url, engine, library = gated
    client = Client(url, verbose=False)
    *_, bib, ris, csl, export, _ = client.predict("Compare CorrSteer and SARSteer", [], "Auto", 6, api_name="/chat")
    assert all(f["interactive"] for f in (bib, ris, csl)), "enabled once an answer cites"
    bib, ris, csl = (f["value"] for f in (bib, ris, csl))  # the client's downloaded copies
    assert export and Path(bib).name == "rag-bot-references.bib" and Path(ris).name == "rag-bot-references.ris"
    assert Path(csl).name == "rag-bot-references.json"
    cited = {c.doc_id for c in engine.ask("Compare CorrSteer and SARSteer").citations}
    parsed = bibtexparser.parse_string(Path(bib).read_text(encoding="utf-8"))
    assert not parsed.failed_blocks and len(parsed.entries) == len(cited) >= 2
    titles = " ".join(e["title"] for e in parsed.entries)
    assert "CorrSteer" in titles and "SARSteer" in titles
    notes = " ".join(e["note"] for e in parsed.entries).replace("\\", "")
    assert all(doc_id in notes for doc_id in cited), (cited, notes)
    assert len(parsed.entries) == len({e.key for e in parsed.entries}), "unique citation keys"
    assert len(rispy.loads(Path(ris).read_text(encoding="utf-8"))) == len(cited)
    items = json.loads(Path(csl).read_text(encoding="utf-8"))
    assert len(items) == len(cited) and all(item["title"] for item in items)


def test_markdown_images_in_corpus_text_are_neutralised() -> None:
    from rag_bot.surfaces.ui.render import markdown_text

    out = answer_html("See ![x](http://evil.example/p.png) and ![y][ref] [1].", turn=1)
    assert "![" not in out and "&#33;[x](http://evil.example/p.png)" in out and 'href="#src-1-1"' in out
    assert "![" not in markdown_text("![a](http://e/p.png)") and "<img" not in markdown_text("<img src=http://e/p>")
    assert "![" not in upload_summary(0, 0, 0, files=0, seconds=0, papers=1, rejected=["![a](http://e/p.png)"])


def test_credentials_in_urls_are_masked_in_what_the_chat_shows() -> None:
    status = status_line("offline", 3, "Chroma server http://ann:s3cret@db.example:8000")
    assert "s3cret" not in status and "http://***@db.example:8000" in status
    answer = _answer("It works [1].", "q")
    answer.notice = "The language model (gpt) could not answer: cannot reach https://bob:hunter2@llm.example/v1."
    assert "hunter2" not in answer_message(answer, turn=1)
    assert "hunter2" not in export_markdown([Turn(question="q", answer=answer)], {})


def test_login_throttle_locks_out_then_doubles(caplog) -> None:
    from rag_bot.surfaces.ui.app import LoginThrottle

    now = [0.0]
    throttle = LoginThrottle([("ann", "pw")], max_failures=5, window=60, clock=lambda: now[0])
    assert throttle.check("ann", "pw", "1.2.3.4")
    assert not any(throttle.check("ann", "bad", "1.2.3.4") for _ in range(5))
    assert not throttle.check("ann", "pw", "1.2.3.4"), "locked out: not even the right password"
    assert throttle.check("ann", "pw", "5.6.7.8"), "another client is not locked out"
    assert "failed logins for 'ann' from 1.2.3.4" in caplog.text
    now[0] = 61  # the lockout ended; 5 more failures lock out twice as long
    assert not any(throttle.check("ann", "bad", "1.2.3.4") for _ in range(5))
    now[0] = 61 + 119
    assert not throttle.check("ann", "pw", "1.2.3.4"), "the second lockout is 120 s"
    now[0] = 61 + 121
    assert throttle.check("ann", "pw", "1.2.3.4") and not throttle.check("bob", "x", "1.2.3.4")
    assert len(throttle.attempts) == 1, "a success resets the doubling: only bob's failure is kept"


def test_login_throttle_memory_is_bounded_whatever_the_user_names() -> None:
    """Each failed login with a new 1 MB user name used to keep that megabyte for good."""
    import tracemalloc

    from rag_bot.surfaces.ui.app import LoginThrottle

    now = [0.0]
    throttle = LoginThrottle([("ann", "pw")], max_failures=5, window=60, clock=lambda: now[0], max_entries=50)
    assert not any(throttle.check("ann", "bad", "1.2.3.4") for _ in range(5))  # ann is locked out
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i in range(300):  # 300 MB of user names, one at a time
            name = f"{i:04d}" + "x" * (1 << 20)
            assert not throttle.check(name, "guess", "1.2.3.4")
            del name
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(throttle.attempts) == 50 and kept < 100_000, kept
    assert all(len(user) == 32 for user, _ in throttle.attempts), "a digest of the name, not the name"
    assert not throttle.check("ann", "pw", "1.2.3.4"), "the flood did not free the locked-out user"
    now[0] = 61
    assert throttle.check("ann", "pw", "1.2.3.4")


@pytest.mark.slow
def test_the_openai_api_and_mcp_are_served_beside_the_chat(server, client):
    import openai

    url = server[0]
    api = openai.OpenAI(base_url=f"{url}v1", api_key="unused", max_retries=0)
    assert {m.id for m in api.models.list().data} == {"rag-bot", "rag-bot-summary", "rag-bot-compare"}
    reply = api.chat.completions.create(model="rag-bot",
                                        messages=[{"role": "user", "content": "What does CorrSteer do?"}])
    text = reply.choices[0].message.content or ""
    assert "[1]" in text and "References" in text
    assert reply.model_extra["rag_bot"]["citations"][0]["title"] == "CorrSteer"
    # the chat on the same port still answers
    assert client.predict("What does CorrSteer do?", "Auto", 0, api_name="/ask")["grounded"]
    request = urllib.request.Request(f"{url}mcp", method="POST", data=b"{}",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        assert exc.code != 404, "the MCP endpoint is mounted"


def test_saved_conversations_are_per_user_in_the_chat(engine, tmp_path) -> None:
    """Through the chat's own handlers: ann's answers are saved as hers; bob neither lists nor opens them;
    a broken conversations file says so once per session and the answers go on."""
    from types import SimpleNamespace

    import gradio as gr

    from rag_bot.store.conversations import FILE_NAME, Conversations
    from rag_bot.surfaces.ui.base import Library, Shared
    from rag_bot.surfaces.ui.chat import UNSAVED, ChatPanel
    from rag_bot.surfaces.ui.history import HistoryPanel
    from rag_bot.surfaces.ui.sources import SourcesPanel

    library = Library(engine)
    library.conversations = Conversations(tmp_path)
    with gr.Blocks():
        shared = Shared(status=gr.Markdown(), turns=gr.State([]), conversation=gr.State(None))
        sources = SourcesPanel(library)
        chat = ChatPanel(library, sources, shared)
        history = HistoryPanel(library, chat, shared)
        chat.render()
        history.render()
        sources.render()
    ann = SimpleNamespace(username="ann", session_hash="a")
    bob = SimpleNamespace(username="bob", session_hash="b")
    last = list(chat.respond("what does CorrSteer gain on HarmBench?", [], [], "Auto", 6, conversation=None, request=ann))[-1]
    conversation = last[shared.conversation]
    assert conversation and 'class="permalink" href="answer/' in last[chat.chatbot][-1]["content"]

    mine = history.restore(conversation, ann)
    assert mine[shared.conversation] == conversation and len(mine[chat.chatbot]) == 2
    assert mine[chat.chatbot][-1] == last[chat.chatbot][-1], "reopened as it was shown live"
    assert 'id="src-1-1"' in mine[sources.html]
    theirs = history.restore(conversation, bob)
    assert theirs[chat.chatbot] == [] and theirs[shared.conversation] is None and theirs[history.browser] is None
    assert theirs[history.list].choices == []
    with pytest.warns(UserWarning, match="gone"):
        assert chat.chatbot not in history.open(conversation, bob)
    with pytest.warns(UserWarning, match="Select a conversation"):
        history.delete(conversation, None, bob)
    assert library.conversations.load(conversation, "ann")

    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / FILE_NAME).write_bytes(b"garbage" * 100)
    library.conversations = Conversations(tmp_path / "broken")
    with pytest.warns(UserWarning, match=UNSAVED[:30]):
        first = list(chat.respond("what does CorrSteer gain on HarmBench?", [], [], "Auto", 6, conversation=None, request=ann))[-1]
    assert first[shared.conversation] is None and "27.1" in first[chat.chatbot][-1]["content"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        list(chat.respond("and SARSteer?", first[chat.chatbot], first[shared.turns], "Auto", 6, conversation=None, request=ann))


def test_permalink_page_and_saved_messages_escape_everything() -> None:
    from rag_bot.surfaces.ui.permalink import permalink_page
    from rag_bot.surfaces.ui.render import conversation_messages, permalink_html

    answer = _answer(f"x is {XSS} [1].", "Some <b>quote</b>.")
    paper = Paper(doc_id="x#1", title="T", text="t", source="f.jsonl", url="javascript:alert(1)")
    page = permalink_page(Turn(question=f"q {XSS}", answer=answer), {"x#1": paper}, 0.0)
    assert "<script" not in page and "<img" not in page and "<b>" not in page and "javascript:" not in page
    assert "&lt;script&gt;" in page and "References" in page and 'value="1"' in page
    assert "Answer not found" in permalink_page(None, {})
    assert permalink_html(None) == "" and 'href="answer/a&amp;b"' in permalink_html("a&b")
    messages = conversation_messages([Turn(question="q <i>", answer=answer)], ["tok"])
    assert messages[0] == {"role": "user", "content": "q &lt;i&gt;"}
    assert messages[1]["content"] == answer_message(answer, 1) + permalink_html("tok")


def test_a_permalink_page_renders_the_saved_markdown_safely(engine, tmp_path) -> None:
    """A saved answer's page, fetched over HTTP: its Markdown rendered as in the chat (no raw `**`, `###`), an
    image or a raw <img> in it never an <img> tag, a javascript: link never a link, the page's CSP kept."""
    import httpx
    from fastapi import FastAPI

    from rag_bot.engine import Engine
    from rag_bot.settings import Settings
    from rag_bot.store.conversations import Conversations
    from rag_bot.surfaces.ui.app import mount_permalinks

    doc_id = paper_with(engine, "CorrSteer")
    saved = Engine(Settings(storage=engine.settings.storage, data=tmp_path), index=engine.index,
                   retriever=engine.retriever, sentences=engine.sentences)
    text = ("### What it does\n\n**CorrSteer selects features by correlation** [1].\n\n- first point\n"
            "- second ![pixel](http://127.0.0.1:9/p.png) <img src=x onerror=alert(1)> [c](javascript:alert(1))\n\n"
            "| benchmark | gain |\n|---|---|\n| HarmBench | 27.1 |\n")
    answer = Answer(question="q", mode="ask", answer=text, grounded=True, retrieved=[],
                    citations=[Citation(n=1, doc_id=doc_id, title="CorrSteer", source="s.txt", quote="It works.")])
    store = Conversations(tmp_path)
    link = store.append(store.create("", "what does CorrSteer do?") or "", "", "what does CorrSteer do?", answer)
    app = FastAPI()
    mount_permalinks(app, saved)
    with serving(app) as base:
        page = httpx.get(f"{base}/answer/{link}", timeout=30)
    assert page.status_code == 200 and "default-src 'none'" in page.headers["content-security-policy"]
    body = page.text
    assert "<h3>What it does</h3>" in body and "<strong>CorrSteer selects features by correlation</strong>" in body
    assert "<li>first point</li>" in body and "<td>HarmBench</td>" in body
    assert "**" not in body and "###" not in body
    assert "<img" not in body and "javascript:alert(1)</a>" not in body and 'href="javascript' not in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body and 'href="http://127.0.0.1:9/p.png"' in body
    assert "References" in body and "CorrSteer" in body


@pytest.mark.slow
def test_the_chat_and_ask_api_take_filters(client):
    icml = client.predict("What does CorrSteer do?", "Auto", 0, "ICML", "2026", "", "", api_name="/ask")
    assert icml["grounded"] and icml["filters"]["venue"] == "ICML"
    assert icml["answer"].startswith("_" + words.FILTER_NOTE.split("{filters}")[0] + "venue ICML, year 2026")
    nothing = client.predict("What does CorrSteer do?", "Auto", 0, "", "1990", "", "", api_name="/ask")
    assert not nothing["grounded"] and words.NO_PAPER_MATCHES_FILTER.format(filters="year 1990") in nothing["answer"]
    messages, *_ = client.predict("What does CorrSteer do?", [], "Auto", 6, "", "2030", "", "", api_name="/chat")
    assert words.NO_PAPER_MATCHES_FILTER.format(filters="year 2030") in str(messages[-1])


def test_an_offline_answer_arrives_in_one_update_after_the_question(engine, tmp_path) -> None:
    """Through the chat's own handlers: the question shows at once, then the offline answer (written at once)
    comes whole in the next update, with its sources and downloads; a follow-up's export holds both turns."""
    import gradio as gr

    from rag_bot.store.conversations import Conversations
    from rag_bot.surfaces.ui.base import Library, Shared
    from rag_bot.surfaces.ui.chat import ChatPanel
    from rag_bot.surfaces.ui.sources import SourcesPanel

    library = Library(engine)
    library.conversations = Conversations(tmp_path)
    with gr.Blocks():
        shared = Shared(status=gr.Markdown(), turns=gr.State([]), conversation=gr.State(None))
        sources = SourcesPanel(library)
        chat = ChatPanel(library, sources, shared)
        chat.render()
        sources.render()

    # Gradio sends each update before the handler goes on, so each is looked at as it was yielded.
    shown = [(update[chat.chatbot][-1]["content"], update) for update in
             chat.respond("what does CorrSteer gain on HarmBench?", [], [], "Auto", 6, conversation=None)]
    assert len(shown) == 2
    (waiting, placeholder), (_, first) = shown
    assert waiting == "…" and placeholder[chat.question] == ""
    assert "27.1" in first[chat.chatbot][-1]["content"] and 'id="src-1-1"' in first[sources.html]
    for button in (chat.export, *chat.cite.values()):
        assert first[button]["interactive"] is True and Path(first[button]["value"]).is_file()

    second = list(chat.respond("how much faster is OServe?", first[chat.chatbot], first[shared.turns], "Auto", 6,
                               conversation=first[shared.conversation]))[-1]
    text = Path(second[chat.export]["value"]).read_text(encoding="utf-8")
    assert "what does CorrSteer gain on HarmBench?" in text and "how much faster is OServe?" in text
    assert "OServe" in Path(second[chat.cite["bibtex"]]["value"]).read_text(encoding="utf-8")

    declined = list(chat.respond("How do I make a sourdough bread starter?", [], [], "Auto", 6,
                                 conversation=None))[-1]
    assert declined[chat.export]["interactive"] is True
    assert all(declined[b]["interactive"] is False for b in chat.cite.values()), "nothing cited: disabled"


def test_sigterm_removes_the_export_folder(seed_storage, tmp_path_factory) -> None:
    """Stopping `rag-bot serve` with SIGTERM (what `kill`, systemd and docker send) leaves no export folder behind."""
    temp = tmp_path_factory.mktemp("tmpdir")
    storage = copy_store(seed_storage, tmp_path_factory)
    with running_server(storage, tmp_path_factory.mktemp("serve"), TMPDIR=str(temp)) as (_url, log):
        assert len(list(temp.glob("rag-bot-export-*"))) == 1  # made at start, for this server's exports
    # running_server sends SIGTERM on exit and waits for the process to end.
    assert list(temp.glob("rag-bot-export-*")) == [], Path(log.name).read_text()[-2000:]
