"""Citable references: the papers an answer (or a conversation) cites, as BibTeX, RIS or CSL-JSON.

Keys are stable (derived from the paper: first author's family name, year, first title word; a short hash of the
doc_id only when two papers of one export would share a key) and unique within an export. Every field the
collection knows is written: title, authors, venue, year, url (http(s) only: a reference manager makes it a link),
abstract and the rag-bot doc_id.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from rag_bot.reading.files import clean_text
from rag_bot.sanitize import plain_safe, safe_url
from rag_bot.text import clean_markup
from rag_bot.types import Answer, Paper

Format = Literal["bibtex", "ris", "csl"]
FORMATS: tuple[Format, ...] = ("bibtex", "ris", "csl")
_TITLE_STOP = {"a", "an", "the", "on", "of", "for", "to", "in", "and", "with", "towards", "toward"}
_BIBTEX_SPECIAL = re.compile(r"([&%$#_{}])")


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


def _family_given(author: str) -> tuple[str, str]:
    """("Doe", "Jane") from "Jane Doe" or "Doe, Jane"."""
    author = " ".join(author.split())
    if "," in author:
        family, _, given = author.partition(",")
        return family.strip(), given.strip()
    parts = author.split(" ")
    return parts[-1], " ".join(parts[:-1])


def base_key(paper: Paper) -> str:
    """The citation key a paper gets when it is alone: `doe2026corrsteer`, `corrsteer2026` without authors."""
    family = re.sub(r"[^a-z]", "", _ascii(_family_given(paper.authors[0])[0]).lower()) if paper.authors else ""
    words = [w for w in re.findall(r"[a-z0-9]+", _ascii(clean_markup(paper.title)).lower()) if w not in _TITLE_STOP]
    word = words[0] if words else re.sub(r"[^a-z0-9]", "", paper.doc_id.lower())[:12] or "paper"
    return f"{family}{paper.year or ''}{word}" if family else f"{word}{paper.year or ''}"


def citation_keys(papers: Sequence[Paper]) -> dict[str, str]:
    """doc_id -> a key unique within these papers and the same whenever the same papers are exported."""
    bases = {p.doc_id: base_key(p) for p in papers}
    counts: dict[str, int] = {}
    for key in bases.values():
        counts[key] = counts.get(key, 0) + 1
    return {
        doc_id: key if counts[key] == 1 else f"{key}-{hashlib.sha1(doc_id.encode()).hexdigest()[:6]}"
        for doc_id, key in bases.items()
    }


def cited_papers(answers: Iterable[Answer], papers: Mapping[str, Paper]) -> list[Paper]:
    """The papers the answers cite, once each, in order of first citation."""
    seen: dict[str, Paper] = {}
    for answer in answers:
        for citation in answer.citations:
            if citation.doc_id not in seen and citation.doc_id in papers:
                seen[citation.doc_id] = papers[citation.doc_id]
    return list(seen.values())


def _note(paper: Paper) -> str:
    """Where the paper comes from, for a round trip: `rag-bot ingest` of the export reads its id (and the
    identifiers no field of the format holds) back from this note."""
    known = "".join(f"; {kind} {value}" for kind, value in sorted(paper.identifiers.items()))
    return f"rag-bot doc_id {paper.doc_id}; source {paper.source}{known}"


def _bibtex_value(text: str) -> str:
    text = " ".join(clean_markup(text).split())
    return _BIBTEX_SPECIAL.sub(r"\\\1", text).replace("~", r"\textasciitilde{}").replace("^", r"\^{}")


def to_bibtex(papers: Sequence[Paper]) -> str:
    """The papers as BibTeX entries (@inproceedings when the venue is known, else @misc)."""
    keys = citation_keys(papers)
    entries = []
    for paper in papers:
        fields = [("title", paper.title)]
        if paper.authors:
            fields.append(("author", " and ".join(paper.authors)))
        if paper.venue:
            fields.append(("booktitle", paper.venue))
        if paper.year:
            fields.append(("year", str(paper.year)))
        if safe_url(paper.url):
            fields.append(("url", safe_url(paper.url) or ""))
        if paper.identifiers.get("doi"):
            fields.append(("doi", paper.identifiers["doi"]))
        if paper.identifiers.get("arxiv"):
            fields += [("eprint", paper.identifiers["arxiv"]), ("archiveprefix", "arXiv")]
        fields += [("abstract", paper.text), ("note", _note(paper))]
        kind = "inproceedings" if paper.venue else "misc"
        body = ",\n".join(f"  {name} = {{{_bibtex_value(value)}}}" for name, value in fields)
        entries.append(f"@{kind}{{{keys[paper.doc_id]},\n{body}\n}}")
    return "\n\n".join(entries) + ("\n" if entries else "")


def to_ris(papers: Sequence[Paper]) -> str:
    """The papers as RIS records (CONF when the venue is known, else GEN)."""
    keys = citation_keys(papers)
    records = []
    for paper in papers:
        lines = [f"TY  - {'CONF' if paper.venue else 'GEN'}", f"ID  - {keys[paper.doc_id]}",
                 f"TI  - {' '.join(clean_markup(paper.title).split())}"]
        lines += [f"AU  - {', '.join(x for x in _family_given(a) if x)}" for a in paper.authors]
        if paper.venue:
            lines.append(f"T2  - {paper.venue}")
        if paper.year:
            lines.append(f"PY  - {paper.year}")
        if safe_url(paper.url):
            lines.append(f"UR  - {safe_url(paper.url)}")
        if paper.identifiers.get("doi"):
            lines.append(f"DO  - {paper.identifiers['doi']}")
        lines += [f"AB  - {' '.join(clean_markup(paper.text).split())}", f"N1  - {_note(paper)}", "ER  - "]
        records.append("\n".join(lines))
    return "\n\n".join(records) + ("\n" if records else "")


def to_csl(papers: Sequence[Paper]) -> list[dict[str, object]]:
    """The papers as CSL-JSON items (what Zotero, Pandoc and citeproc read)."""
    keys = citation_keys(papers)
    items: list[dict[str, object]] = []
    for paper in papers:
        item: dict[str, object] = {
            "id": keys[paper.doc_id],
            "type": "paper-conference" if paper.venue else "article",
            "title": " ".join(clean_markup(paper.title).split()),
            "abstract": " ".join(clean_markup(paper.text).split()),
            "note": _note(paper),
        }
        if paper.identifiers.get("doi"):
            item["DOI"] = paper.identifiers["doi"]
        if paper.authors:
            item["author"] = [{"family": f, "given": g} for f, g in map(_family_given, paper.authors)]
        if paper.venue:
            item["container-title"] = paper.venue
        if paper.year:
            item["issued"] = {"date-parts": [[paper.year]]}
        if safe_url(paper.url):
            item["URL"] = safe_url(paper.url)
        items.append(item)
    return items


def export(papers: Sequence[Paper], fmt: Format) -> str:
    """The papers in one of the formats, as text; their fields under the sanitiser's plain rules (a reference
    manager or a Markdown preview may render them: no image, raw HTML or non-http(s) link from the corpus)."""
    papers = [_plain(paper) for paper in papers]
    if fmt == "bibtex":
        return to_bibtex(papers)
    if fmt == "ris":
        return to_ris(papers)
    return json.dumps(to_csl(papers), ensure_ascii=False, indent=2) + "\n"


def _plain(paper: Paper) -> Paper:
    """The paper's written fields under the plain rules, without terminal escapes or control characters (an
    imported paper, or a file name, may hold them: an export is shown in terminals and editors); the one-line
    fields on one line (a line break in a venue would start a RIS field of its own)."""
    def line(value: str) -> str:
        return " ".join(clean_text(value).split())

    return paper.model_copy(update={
        "doc_id": line(paper.doc_id), "source": line(paper.source),
        "title": plain_safe(line(paper.title)), "text": plain_safe(clean_text(paper.text)),
        "authors": [plain_safe(line(a)) for a in paper.authors],
        "venue": plain_safe(line(paper.venue)) if paper.venue else None,
        "identifiers": {kind: line(value) for kind, value in paper.identifiers.items()},
    })
