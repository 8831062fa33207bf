"""Reading: corpus files and folders into `Paper`s, with every problem named by file and line.

Takes paths; returns a `ReadResult` (`corpus.scan_paths`: problems, the paper count and a stream that reads the
papers again record by record; `corpus.read_paths`: everything at once). `corpus.file_format` picks the reader by
content, then extension: seed text, JSONL, CSV here; BibTeX, RIS, CSL-JSON, arXiv, OpenReview and Semantic
Scholar in one module each (`formats` dispatches). `identity` says which records are one paper. Never raises on
bad input.
"""
