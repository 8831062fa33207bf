"""The most each field of a paper may hold, in one place: what an ingest, a chat upload and an import accept.

Why: a paper is one Chroma record, and a long string is stored in pieces of 900 bytes (rag_bot/store/records.py),
each piece a metadata key; Chroma's folder store refuses a record of about 5,460 keys or more, and a refused record
leaves the store unreadable for good. With every field within these limits a paper is at most a few hundred keys
(the worst case, every character escaped, is computed in tests/reading/test_limits.py).

Each limit is the largest real value times about 4, rounded up; measured on the 22,148 real records of
shared/data/ml_abstracts.jsonl.gz by bench/fit/field_limits.py (the figures are beside each constant). A record over a
limit is reported and skipped (an import refuses the whole file: it writes all or nothing); abstracts and titles are
still cut to size below their limit, as before, and skipped only past it."""

from __future__ import annotations

from rag_bot.settings import Settings
from rag_bot.types import Paper

# Cut to size (reported, the paper kept): titles at 300 characters; abstracts at RAG_BOT_MAX_ABSTRACT_CHARS, by
# default 20,000 (the longest real abstract, 4,615, x4 rounded).
TITLE_CUT = 300
ABSTRACT_CUT: int = Settings.model_fields["max_abstract_chars"].default

# Skipped past these (characters). The abstract's cut is already the longest real one x4, so its limit is five times
# the cut (100,000 characters, 22 times the longest real abstract: a whole paper or a dump, no abstract); it also caps
# RAG_BOT_MAX_ABSTRACT_CHARS. The longest real title has 192 characters.
ABSTRACT_CHARS = 100_000
TITLE_CHARS = 800
# The corpus's ids (22) and venues (7: "NeurIPS") are short codes; other sources spell them out (a BibTeX
# booktitle, an arXiv journal-ref): they get the room of a title (the longest real title, 192, x4 rounded).
ID_CHARS = 800
VENUE_CHARS = 800
AUTHORS = 300  # the longest real author list has 69 names
AUTHOR_CHARS = 250  # the longest real name has 53 characters
URL_CHARS = 400  # a record's URL and every link found in its text: the longest real one has 98
LINKS = 12  # the record's URL and the links in its text: at most 3 in a real record
ALIASES = 24  # the names a paper introduces (found in its text): at most 6 in a real record
ALIAS_CHARS = 400  # the longest real name has 91 characters
IDENTIFIERS = 4  # doi, arxiv, openreview, s2: an ingest keeps no other kind (rag_bot/reading/identity.py)
IDENTIFIER_CHARS = 800  # a DOI or an OpenReview id, spelt out as an id is
# An imported record's metadata (the whole fields, as `rag-bot export` writes them): a real paper has 10 keys of at
# most 11 characters ("fingerprint"), 11 with `identifiers`; any other key is kept as it is, its text within a
# title's room.
METADATA_KEYS = 44
KEY_CHARS = 48
VALUE_CHARS = 800
# One line of a JSONL corpus or of an exported collection, in characters: a record within every limit written with
# every character as a \\u escape (the worst case, tests/reading/test_limits.py) stays under it; the longest real line has
# 4,956 bytes. A longer line is skipped as it streams, never held whole.
LINE_CHARS = 4_000_000


def _long(name: str, value: str | None, limit: int) -> str | None:
    if value is not None and len(value) > limit:
        return f"{name} is {len(value):,} characters long (the limit is {limit:,})"
    return None


def _many(name: str, values: list[str] | dict[str, str], limit: int, each: int, one: str) -> str | None:
    if len(values) > limit:
        return f"it has {len(values):,} {name} (the limit is {limit:,})"
    items = values.values() if isinstance(values, dict) else values
    longest = max(items, key=len, default="")
    return _long(f"{one} {longest[:40]!r}...", longest, each) if len(longest) > each else None


def text_problem(title: str, abstract: str) -> str | None:
    """Why a record's title or abstract is beyond any real one (over `TITLE_CHARS`, `ABSTRACT_CHARS`), before they
    are cut to size; None when within."""
    return _long("the title", title, TITLE_CHARS) or _long("the abstract", abstract, ABSTRACT_CHARS)


def paper_problem(paper: Paper) -> str | None:
    """Why a paper is over a limit of rag_bot/reading/limits.py (the first field that is), or None."""
    return (
        _long("the id", paper.doc_id, ID_CHARS)
        or text_problem(paper.title, paper.text)
        or _long("the venue", paper.venue, VENUE_CHARS)
        or _long("the url", paper.url, URL_CHARS)
        or _long("the source", paper.source, ID_CHARS)
        or _many("authors", paper.authors, AUTHORS, AUTHOR_CHARS, "the author")
        or _many("identifiers", paper.identifiers, IDENTIFIERS, IDENTIFIER_CHARS, "the identifier")
        or _many("links", paper.links, LINKS, URL_CHARS, "the link")
        or _many("names", paper.aliases, ALIASES, ALIAS_CHARS, "the name")
    )


def metadata_problem(metadata: dict[str, object], known: set[str]) -> str | None:
    """Why an imported record's metadata is over a limit: too many keys, a key name too long, or a text of a key
    other than the `known` ones (checked as the paper's fields) too long; None when within."""
    if len(metadata) > METADATA_KEYS:
        return f"its metadata has {len(metadata):,} keys (the limit is {METADATA_KEYS})"
    for key, value in metadata.items():
        if len(key) > KEY_CHARS:
            return f"its metadata key {key[:40]!r}... is {len(key):,} characters long (the limit is {KEY_CHARS})"
        if key not in known and isinstance(value, str) and len(value) > VALUE_CHARS:
            return f"its {key!r} metadata is {len(value):,} characters long (the limit is {VALUE_CHARS})"
    return None


def derived(names: list[str], links: list[str]) -> tuple[list[str], list[str]]:
    """The names and links found in a text, within `ALIASES`/`ALIAS_CHARS` and `LINKS`/`URL_CHARS` (the first ones
    kept; they are found, not given, so a text full of them loses no paper)."""
    return ([n for n in names if len(n) <= ALIAS_CHARS][:ALIASES],
            [u for u in links if len(u) <= URL_CHARS][:LINKS])
