"""The largest real value of every field of a paper, measured on the 22,148 real records of
shared/data/ml_abstracts.jsonl.gz (read in place), beside the limit rag_bot/reading/limits.py sets for it.

Each record is measured twice: as given (the raw JSONL fields) and as the reader makes it into a `Paper` (the links
and names found in its text), and once as `rag-bot export` would write it (its metadata keys, and the bytes of its
line without the vector). Run: `.venv/bin/python -m bench.fit.field_limits [FILE]`."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from rag_bot.reading import limits
from rag_bot.reading.corpus import read_paths
from rag_bot.store.records import paper_metadata

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "ml_abstracts.jsonl.gz"


def measure(path: Path) -> dict[str, int]:
    """The largest value of each measured field over the file's records."""
    top: dict[str, int] = {}

    def seen(name: str, value: int) -> None:
        top[name] = max(top.get(name, 0), value)

    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            seen("line bytes", len(line.encode("utf-8")))
            for key in ("id", "title", "abstract", "venue", "url"):
                seen(f"{key} chars", len(str(record.get(key) or "")))
            authors = record.get("authors") or []
            seen("authors", len(authors))
            seen("author chars", max((len(a) for a in authors), default=0))
            seen("identifiers", len(record.get("identifiers") or {}))
    for paper in read_paths([path]).papers:
        seen("source chars", len(paper.source))
        seen("links", len(paper.links))
        seen("link chars", max((len(link) for link in paper.links), default=0))
        seen("aliases", len(paper.aliases))
        seen("alias chars", max((len(a) for a in paper.aliases), default=0))
        meta = paper_metadata(paper, "0" * 16 + ":model") | {"chunks": 1}
        meta.pop("text")  # an export keeps the text as the record's document, not in its metadata
        seen("metadata keys", len(meta))
        seen("metadata key chars", max(len(k) for k in meta))
        seen("record bytes", len(json.dumps({"document": paper.text, "metadata": meta}).encode()))
    return top


LIMITS = {
    "id chars": limits.ID_CHARS, "title chars": limits.TITLE_CHARS, "abstract chars": limits.ABSTRACT_CHARS,
    "venue chars": limits.VENUE_CHARS, "url chars": limits.URL_CHARS, "authors": limits.AUTHORS,
    "author chars": limits.AUTHOR_CHARS, "identifiers": limits.IDENTIFIERS, "links": limits.LINKS,
    "link chars": limits.URL_CHARS, "aliases": limits.ALIASES, "alias chars": limits.ALIAS_CHARS,
    "metadata keys": limits.METADATA_KEYS, "metadata key chars": limits.KEY_CHARS,
    "line bytes": limits.LINE_CHARS, "source chars": limits.ID_CHARS,
}


def main() -> None:
    """Print each field's largest real value, its limit, and the margin."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DATA, help="a JSONL(.gz) of records (default: the real abstracts)")
    path = parser.parse_args().file
    top = measure(path)
    print(f"{path.name}: largest real value of each field, and its limit (rag_bot/reading/limits.py)")
    print(f"{'field':<20}{'real max':>12}{'limit':>12}{'x':>8}")
    for name, value in top.items():
        limit = LIMITS.get(name)
        ratio = f"{limit / value:.1f}" if limit and value else "-"
        shown = f"{limit:,}" if limit is not None else "-"
        print(f"{name:<20}{value:>12,}{shown:>12}{ratio:>8}")
    print(f"abstracts are cut at RAG_BOT_MAX_ABSTRACT_CHARS (default {limits.ABSTRACT_CUT:,}), titles at "
          f"{limits.TITLE_CUT}; a record is skipped only past the limits above")


if __name__ == "__main__":
    main()
