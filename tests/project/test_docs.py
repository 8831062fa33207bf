"""The documentation: a README that fits on a screen or two and opens with the two commands, and a docs site that
builds with every link and anchor checked (mkdocs --strict, validation in mkdocs.yml)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

MAX_README_WORDS = 1500


def test_the_readme_is_short_and_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.split()) <= MAX_README_WORDS
    first_block = text.split("```")[1]
    assert "make run" in first_block and "make test" in first_block
    for target in re.findall(r"\]\(((?!https?:)[^)#]+)", text):
        assert (ROOT / target).exists(), target


def test_the_docs_site_builds_strictly(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run([str(mkdocs), "build", "--strict", "-d", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "architecture" / "index.html").exists()
    pages = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert all((tmp_path / "site" / (p if p != "index" else "") / "index.html").exists() for p in pages)
