"""The one locked split (rag_bot/evaluation/split.py): a fixed third of every labelled set, the same line for every
fitter, trainer and report in bench/ and train/ (issue 38: the rule was written in five scripts)."""

from __future__ import annotations

import hashlib
import json
import re

from rag_bot.evaluation.split import locked
from tests.conftest import ROOT


def test_about_a_third_of_the_dev_questions_are_locked_and_the_rule_is_the_documented_one():
    ids = [json.loads(line)["id"] for line in (ROOT / "tests" / "data" / "dev_questions.jsonl").read_text().splitlines()
           if line.strip()]
    share = sum(map(locked, ids)) / len(ids)
    assert 0.25 <= share <= 0.42, share
    assert locked("q001") == (int(hashlib.sha1(b"q001").hexdigest(), 16) % 3 == 0)


def test_no_script_keeps_its_own_copy_of_the_rule():
    copies = [p.relative_to(ROOT).as_posix() for folder in ("bench", "train", "rag_bot") for p in (ROOT / folder).rglob("*.py")
              if re.search(r"def locked\(", p.read_text(encoding="utf-8"))]
    assert copies == ["rag_bot/evaluation/split.py"], copies
