"""Moving a collection to another embedding model (`rag-bot ingest --reembed`), resumable and never half-done.

The papers are read back from the store (their text and metadata, no source file needed) and indexed by the
model the settings choose into a staging collection (`<collection>-reembed`), with progress. Staging is an
ordinary incremental ingest: a run cut short resumes where it stopped (papers already staged with this model are
skipped by their fingerprints). Only when every paper is staged are the collection's old collections dropped and
the staging ones renamed into their place; a run cut short between the two finishes the swap when run again.
Until then questions keep being answered from the old collection (with its own model).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from rag_bot.errors import StoreError
from rag_bot.settings import Settings
from rag_bot.store.index import BATCH_PAPERS, PaperIndex

log = logging.getLogger(__name__)

KINDS = ("papers", "chunks")  # the collections a collection is made of; its sentence vectors are dropped


def staging_name(collection: str) -> str:
    return f"{collection}-reembed"


def reembed(settings: Settings, progress: Callable[[int], None] | None = None,
            on_start: Callable[[int], None] | None = None, batch_papers: int = BATCH_PAPERS) -> tuple[int, str]:
    """Re-embed the collection with the settings' model, `batch_papers` papers staged at a time; (papers moved,
    what was done in words)."""
    staging_settings = settings.model_copy(update={"collection": staging_name(settings.collection)})
    old = PaperIndex(settings)
    staging = PaperIndex(staging_settings)
    if old.count() == 0 and staging.count() > 0:  # an earlier run staged everything and was cut short swapping
        _swap(settings, staging)
        return staging.count(), "finished moving the collection (an earlier run had staged it)"
    if old.count() == 0:
        raise StoreError(f"the collection {settings.collection!r} is empty: there is nothing to re-embed "
                         "(`rag-bot ingest` indexes files with the model the settings choose)")
    before = old.recorded_model().name  # the model that made the old vectors (the settings name the new one)
    papers = old.all_papers()
    if on_start:
        on_start(len(papers))
    staging.ingest(papers, prune=True, progress=progress, batch_papers=batch_papers)
    if staging.count() != len(papers):
        raise StoreError(f"staged {staging.count()} of {len(papers)} papers; run the same command again to resume")
    moved = len(papers)
    _swap(settings, staging)
    return moved, f"re-embedded with {before} -> {staging.index_version.split('/')[0]}"


def _swap(settings: Settings, staging: PaperIndex) -> None:
    """Drop the collection's old collections and rename the staged ones into their place."""
    client = staging.client
    names = {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}
    for suffix in (*KINDS, "sentences"):
        name = f"{settings.collection}_{suffix}"
        if name in names:
            client.delete_collection(name)
    for kind in KINDS:
        client.get_collection(f"{staging_name(settings.collection)}_{kind}").modify(name=f"{settings.collection}_{kind}")
    stale = f"{staging_name(settings.collection)}_sentences"
    if stale in names:
        client.delete_collection(stale)
    log.info("collection %s moved to %s", settings.collection, staging.index_version)
