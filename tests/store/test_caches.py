"""The derived caches' helper (rag_bot/store/caches.py): a save is published whole or not at all, a process killed
while saving leaves the previous cache readable, and a cache of another format or state is never read and is removed
by the next save."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rag_bot.store.caches import DerivedCache
from tests.conftest import ROOT

CACHE = DerivedCache("demo", format=2)
STATE = {"papers": 3, "chunks": 5, "generation": "g1"}


def _save(folder: Path, text: str) -> None:
    with CACHE.stage(folder) as tmp:
        (tmp / "data.txt").write_text(text)
        (tmp / "sub").mkdir()
        (tmp / "sub" / "more.txt").write_text(text * 2)


def test_a_save_killed_half_way_leaves_the_previous_cache_readable(tmp_path: Path) -> None:
    folder = tmp_path / "demo" / CACHE.key(STATE)
    _save(folder, "previous")
    # A real process, killed (SIGKILL: no cleanup runs) after writing half of a replacement at the same key.
    child = (f"import os, signal\nfrom pathlib import Path\nfrom rag_bot.store.caches import DerivedCache\n"
             f"with DerivedCache('demo', 2).stage(Path({str(folder)!r})) as tmp:\n"
             f"    (tmp / 'data.txt').write_text('half')\n"
             f"    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", child], env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    assert CACHE.saved(folder) and (folder / "data.txt").read_text() == "previous"
    assert (folder / "sub" / "more.txt").read_text() == "previousprevious"
    left = [p for p in folder.parent.iterdir() if p != folder]
    assert len(left) == 1 and left[0].name.startswith("."), "the killed writer's folder is aside, never in place"

    newer = tmp_path / "demo" / CACHE.key(STATE | {"generation": "g2"})
    _save(newer, "newer")
    assert [p.name for p in newer.parent.iterdir()] == [newer.name], "the old state and the dead writer's are gone"
    assert (newer / "data.txt").read_text() == "newer"


def test_a_cache_of_an_older_format_is_not_found_and_is_removed_by_the_next_save(tmp_path: Path) -> None:
    older = DerivedCache("demo", format=1)
    assert older.key(STATE) != CACHE.key(STATE) and CACHE.key(dict(STATE)) == CACHE.key(STATE)
    old_folder = tmp_path / "demo" / older.key(STATE)
    with older.stage(old_folder) as tmp:
        (tmp / "data.txt").write_text("format 1")
    folder = tmp_path / "demo" / CACHE.key(STATE)
    assert not CACHE.saved(folder)  # the reader looks at its own format's folder only: a rebuild, not an error
    _save(folder, "format 2")
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
    assert folder.stat().st_mode & 0o777 == 0o755


def test_an_unreadable_save_is_replaced_and_a_failed_build_publishes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "demo" / CACHE.key(STATE)
    _save(folder, "damaged")
    (folder / "data.txt").write_text("{not what was saved")
    _save(folder, "repaired")  # the caller could not read it: the new save takes its place
    assert (folder / "data.txt").read_text() == "repaired" and CACHE.saved(folder)

    newer = tmp_path / "demo" / CACHE.key(STATE | {"generation": "g2"})
    with pytest.raises(OSError):
        with CACHE.stage(newer) as tmp:
            (tmp / "data.txt").write_text("half")
            raise OSError("no space left on device")
    assert [p.name for p in folder.parent.iterdir()] == [folder.name], "nothing of the failed build is left"
