"""Semantic Scholar papers, as its Graph API returns them (`paperId`, `externalIds`, `authors` as objects)."""

from __future__ import annotations

from rag_bot.reading.fields import as_dict, as_list, plain, year
from rag_bot.reading.fields import doi as fields_doi


def is_s2_paper(record: dict[str, object]) -> bool:
    """A Graph API paper: a `paperId`, or `externalIds` beside a title."""
    return "paperId" in record or ("externalIds" in record and "title" in record)


def from_s2_paper(paper: dict[str, object]) -> dict[str, object]:
    """A Graph API paper as a corpus record (its DOI, arXiv id and Semantic Scholar id kept)."""
    external = as_dict(paper.get("externalIds"))
    venue = paper.get("venue") or as_dict(paper.get("publicationVenue")).get("name")
    doi = fields_doi(external.get("DOI"))
    s2 = plain(paper.get("paperId")) or (f"CorpusId:{external['CorpusId']}" if external.get("CorpusId") else "")
    return {
        "id": s2 or doi,
        "title": plain(paper.get("title"), "html"),
        "abstract": plain(paper.get("abstract"), "html"),
        "authors": [plain(a.get("name") if isinstance(a, dict) else a) for a in as_list(paper.get("authors"))],
        "venue": plain(venue) or None,
        "year": year(paper.get("year") or paper.get("publicationDate")),
        "url": plain(paper.get("url")) or (f"https://www.semanticscholar.org/paper/{s2}" if s2 else None),
        "identifiers": {"doi": doi, "arxiv": plain(external.get("ArXiv")), "s2": s2},
    }
