"""Writing: grounded papers into a cited answer.

Takes the question, its mode and the source papers; returns streamed text and a checked `Answer`
(`compose.PaperSynthesizer` over the offline writer, or `llm.LLMComposer`). Helpers: `citations` (markers and their support), `quotes`, `roles` (what each sentence does),
`themes` (groups and headings), `references` (BibTeX, RIS, CSL-JSON).
"""
