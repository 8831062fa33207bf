"""What the chat's page carries besides its components: the stylesheet (`CSS`) and the script in its head (`HEAD`)."""

CSS = """
.status-line { font-size: 0.9em; opacity: 0.85; }
.sources-panel { max-height: 72vh; overflow-y: auto; }
.src-card { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px;
            margin: 6px 0; scroll-margin: 12px; }
.src-card.flash { animation: src-flash 1.6s ease-out; }
@keyframes src-flash { from { background: #fff3b0; } to { background: transparent; } }
.src-n { font-weight: 700; margin-right: 4px; }
.src-title { font-weight: 600; }
.src-meta { font-size: 0.85em; opacity: 0.8; margin: 2px 0 4px; }
.src-abstract { font-size: 0.9em; line-height: 1.45; }
.src-abstract mark { background: #ffe58a; color: inherit; padding: 0 1px; }
a.cite { text-decoration: none; font-weight: 600; }
.certainty { margin: 0 0 6px; font-size: 0.9em; }
.turn-sources > summary { cursor: pointer; font-weight: 600; margin-top: 6px; }
/* Answer tables (the comparison): Gradio's Markdown wraps with overflow-wrap:anywhere, so at 1,440 px a column
   shrank until its row labels broke inside words ("App/roa/ch"); here a word breaks only when alone it is wider
   than its cell, and the row labels never break. */
#chat table th, #chat table td { overflow-wrap: break-word; word-break: normal; hyphens: manual; }
#chat table td:first-child, #chat table th:first-child { white-space: nowrap; min-width: max-content; }
"""

# A click on an inline [n] scrolls to (and flashes) its source card, opening the answer's section first.
HEAD = """
<script>
document.addEventListener("click", function (event) {
  var link = event.target && event.target.closest ? event.target.closest('a[href^="#src-"]') : null;
  if (!link) { return; }
  event.preventDefault();
  event.stopPropagation();
  var card = document.getElementById(link.getAttribute("href").slice(1));
  if (!card) { return; }
  var section = card.closest("details");
  if (section) { section.open = true; }
  card.scrollIntoView({behavior: "smooth", block: "nearest"});
  card.classList.remove("flash"); void card.offsetWidth; card.classList.add("flash");
}, true);
</script>
"""
