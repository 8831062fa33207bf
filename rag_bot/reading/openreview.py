"""OpenReview notes, as its API returns them (v2: each content field is `{"value": ...}`; v1: plain values)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rag_bot.reading.fields import plain, year


def is_openreview_note(record: dict[str, object]) -> bool:
    """A note: a `content` object with a title, and a forum or an invitation."""
    content = record.get("content")
    return isinstance(content, dict) and "title" in content and any(
        k in record for k in ("forum", "invitation", "invitations", "replyto"))


def _value(content: dict[str, object], key: str) -> object:
    value = content.get(key)
    return value.get("value") if isinstance(value, dict) else value


def _stamp_year(stamp: object) -> str | None:
    """The year of a date in milliseconds since 1970, as digits; a date no calendar holds (1e30, NaN) is given back
    as text, which the record checks report as not a year (the paper is kept without one)."""
    if not isinstance(stamp, (int, float)):
        return None
    try:
        return str(dt.datetime.fromtimestamp(stamp / 1000, dt.UTC).year)
    except (OverflowError, ValueError, OSError):
        return f"date {stamp!r} ms"


def from_openreview_note(note: dict[str, Any]) -> dict[str, object]:
    """A note as a corpus record: its forum id, and a year from its venue or its publication date."""
    content = note["content"]
    forum = plain(note.get("forum") or note.get("id"))
    venue = plain(_value(content, "venue")) or None
    stamp = note.get("pdate") or note.get("odate") or note.get("cdate") or note.get("tcdate")
    when = year(venue) or _stamp_year(stamp)
    authors = _value(content, "authors") or []
    return {
        "id": forum,
        "title": plain(_value(content, "title"), "html"),
        "abstract": plain(_value(content, "abstract"), "html"),
        "authors": [plain(a) for a in (authors if isinstance(authors, list) else [authors])],
        "venue": venue,
        "year": when,
        "url": f"https://openreview.net/forum?id={forum}" if forum else None,
        "identifiers": {"openreview": forum},
    }
