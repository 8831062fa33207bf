"""How the offline writer's answers read: the roles of the sentences it quotes, clean quotes, and its headings.

    python -m bench.eval.writing [--sizes seeds 3000] [--code PATH] [--tag NAME] [--headings FILE]

On the seeds' dev-set summary and comparison questions and, at 3,202 papers (storage/bench-3000, built by
bench/collections.py), the judged summary and comparison questions (bench/data/relevance_questions.jsonl) and
every labelled paper compared with the next one, whether:

- a summary line's sentence is one the readers labelled method or result (bench/data/sentence_roles.jsonl; lines
  of unlabelled papers are not counted);
- a comparison cell's sentence has its row's role (Problem: problem, Approach: method, Reported results: result);
- a quote as shown opens with a connective ("However,", any one-word lead-in with a comma), a lead-in that
  refers back ("Motivated by this …,"), or an unresolved this/these/it/they: checked by patterns written here,
  apart from rag_bot/writing/quotes.py's;
- every quote is found verbatim in its abstract and the citations are consistent (integrity).

Locked parts (rag_bot.evaluation.split `locked`): questions by id, labelled papers by doc_id (as in
bench/fit/roles.py; nothing is chosen on them). `--code` imports rag_bot from another checkout (a baseline in the
same run). `--headings FILE` writes every theme heading with its papers' ids, for judging.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from bench.checkout import use_rag_bot_from
from rag_bot.evaluation.split import locked  # the one locked split

ROOT = Path(__file__).resolve().parents[2]

ROW_ROLE = {"Problem": "problem", "Approach": "method", "Reported results": "result"}
# A shown quote that does not read alone: a one-word lead-in with its comma, a short lead-in referring back, or an
# opening pronoun or demonstrative (not "this paper").
_ONE_WORD_LEAD = re.compile(r"^[A-Z][a-z]+(?:ly)?,\s")
_CONNECTIVES = re.compile(r"^(?:however|moreover|furthermore|additionally|thus|hence|therefore|consequently|"
                          r"nevertheless|nonetheless|also|then|instead|meanwhile|finally|notably|specifically|"
                          r"in (?:addition(?! to)|particular|contrast(?! to)|practice)|to (?:this|that) end|"
                          r"as a result)\b", re.IGNORECASE)
# A lead-in before the main clause (not the sentence's subject: "We prove that under this model, …" is fine).
_BACK_LEAD = re.compile(r"^(?!(?:we|our|the|a|an|it|this (?:paper|work|study))\b)[^,]{0,90}"
                        r"\b(?:this|these|those|such)\b(?!\s+(?:paper|work|study|article)\b)[^,]{0,60},\s",
                        re.IGNORECASE)
_POINTING = re.compile(r"^(?:(?:this|these|those|such|they|its|their)\b(?!\s+(?:paper|work|study|article)\b)|"
                       r"it\b(?!\s+(?:is|was|has been|remains|seems)\b[^.]*\b(?:to|that)\b))", re.IGNORECASE)


def dangling(shown: str) -> str | None:
    """Why a shown quote does not read alone, or None."""
    text = shown.lstrip("“\"'(").strip()
    if _CONNECTIVES.match(text) or _ONE_WORD_LEAD.match(text):
        return "connective"
    if _BACK_LEAD.match(text) and not re.match(r"^(?:in )?this (?:paper|work|study)", text, re.IGNORECASE):
        return "refers back"
    if _POINTING.match(text):
        return "unresolved"
    return None


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Judge:
    """Looks up the readers' role of the sentence a shown text comes from."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.labels = {(r["doc_id"], r["sha1"]): r["role"] for r in read_jsonl(ROOT / "bench/data/sentence_roles.jsonl")}

    def sentence(self, doc_id: str, shown: str) -> str | None:
        """The abstract sentence a shown quote or cell (capitalised, cut with "…") comes from."""
        part = re.sub(r"\s*\[\d+\]\s*$", "", shown).strip().rstrip("…").strip().replace("\\|", "|")
        lowered = part[:1].lower() + part[1:]
        sentences = self.engine.sentences.of(self.engine.papers[doc_id])[0]
        return next((s for s in sentences if part in s or lowered in s), None)

    def role(self, doc_id: str, sentence: str | None) -> str | None:
        if sentence is None:
            return None
        return self.labels.get((doc_id, hashlib.sha1(sentence.encode()).hexdigest()[:12]))


def summary_lines(answer) -> list[tuple[str, str]]:
    """(doc_id, shown sentence) of each themed line `- **Title**: sentence [n]`."""
    by_n = {c.n: c.doc_id for c in answer.citations}
    out = []
    for line in answer.answer.split("\n"):
        m = re.match(r"^- \*\*.+?\*\*: (.+) \[(\d+)\]$", line)
        if m and int(m.group(2)) in by_n:
            out.append((by_n[int(m.group(2))], m.group(1)))
    return out


def table_cells(answer) -> list[tuple[str, str, str]]:
    """(row, doc_id, shown sentence) of each comparison cell."""
    by_n = {c.n: c.doc_id for c in answer.citations}
    out = []
    for line in answer.answer.split("\n"):
        m = re.match(r"^\| \*\*(Problem|Approach|Reported results)\*\* \|(.*)\|$", line)
        if not m:
            continue
        for cell in re.split(r"(?<!\\)\|", m.group(2)):
            cm = re.match(r"^\s*(.+?) \[(\d+)\]\s*$", cell)
            if cm and int(cm.group(2)) in by_n:
                out.append((m.group(1), by_n[int(cm.group(2))], cm.group(1)))
    return out


def _empty_cells(answer) -> list[tuple[str, str, str]]:
    """(row, "", "") for each "—" cell of a comparison."""
    out = []
    for line in answer.answer.split("\n"):
        m = re.match(r"^\| \*\*(Problem|Approach|Reported results)\*\* \|(.*)\|$", line)
        if m:
            out += [(m.group(1), "", "") for cell in re.split(r"(?<!\\)\|", m.group(2)) if cell.strip() == "—"]
    return out


def headings(answer) -> list[tuple[str, list[str]]]:
    """(heading, doc_ids under it) of a summary answer's themes (not "Also on this topic")."""
    by_n = {c.n: c.doc_id for c in answer.citations}
    out: list[tuple[str, list[str]]] = []
    for block in answer.answer.split("\n\n"):
        lines = block.split("\n")
        m = re.match(r"^\*\*(.+)\*\*$", lines[0])
        if m and m.group(1) == "Also on this topic":
            continue
        body = lines[1:] if m else lines
        ids = [by_n[int(n)] for line in body if line.startswith("- **")
               for n in re.findall(r"\[(\d+)\]\s*$", line) if int(n) in by_n]
        if ids:  # a themed block, with its heading or without one ("")
            out.append((m.group(1) if m else "", ids))
    return out


def measure(engine, judge: Judge, jobs: list[tuple[str, str, str, bool]], store: str, sink: list[dict]) -> dict:
    """jobs: (question id, question, mode, question locked)."""
    from rag_bot.evaluation.evaluate import citation_integrity
    from rag_bot.text import clean_markup

    tally: dict[str, list] = {}

    def add(key: str, value) -> None:
        tally.setdefault(key, []).append(value)

    for qid, question, mode, q_locked in jobs:
        answer = engine.ask(question, mode=mode)
        if not answer.grounded:
            add("declined", 1)
            continue
        add("declined", 0)
        quotes_ok = all(c.quote in clean_markup(engine.papers[c.doc_id].text).replace("[", "(").replace("]", ")")
                        or c.quote in " ".join(engine.sentences.of(engine.papers[c.doc_id])[0])
                        for c in answer.citations)
        add("integrity", int(citation_integrity(answer) and quotes_ok))
        shown = summary_lines(answer) if answer.mode == "summary" else []
        cells = table_cells(answer) if answer.mode == "compare" else []
        if answer.mode == "ask":
            shown = [(c.doc_id, line) for c in answer.citations
                     for line in re.findall(r"(?:^|: |\s)([A-Z][^\[\]]+?) \[" + str(c.n) + r"\]", answer.answer)]
        for _doc, text in shown + [(d, t) for _, d, t in cells]:
            why = dangling(text)
            add("quotes", int(why is None))
            if why:
                add(f"quote {why}", text[:90])
        for doc_id, text in summary_lines(answer) if answer.mode == "summary" else []:
            role = judge.role(doc_id, judge.sentence(doc_id, text))
            if role:
                part = "locked" if locked(doc_id) else "fit"
                add(f"lines {part}", int(role in ("method", "result")))
                add(f"lines q-{'locked' if q_locked else 'fit'}", int(role in ("method", "result")))
        for row, doc_id, text in cells:
            role = judge.role(doc_id, judge.sentence(doc_id, text))
            if role:
                part = "locked" if locked(doc_id) else "fit"
                add(f"cells {part}", int(role == ROW_ROLE[row]))
                add(f"cells {row}", int(role == ROW_ROLE[row]))
        for row, _, _ in [c for c in _empty_cells(answer)]:
            add(f"empty {row}", 1)
        if answer.mode == "summary":
            for heading, ids in headings(answer):
                add("groups headed", int(bool(heading)))
                sink.append({"store": store, "question_id": qid, "question": question, "heading": heading,
                             "doc_ids": ids})
    return {k: (round(sum(v) / len(v), 3), len(v)) if v and isinstance(v[0], int) else v[:8]
            for k, v in sorted(tally.items())}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", default=["seeds", "3000"])
    parser.add_argument("--code", type=Path, default=ROOT)
    parser.add_argument("--tag", default="head")
    parser.add_argument("--headings", type=Path)
    args = parser.parse_args()
    use_rag_bot_from(args.code)
    from rag_bot.engine import Engine
    from rag_bot.settings import Settings

    report: dict = {"code": str(args.code), "tag": args.tag}
    sink: list[dict] = []
    for size in args.sizes:
        store = ROOT / "storage" / f"bench-{size}"
        if not (store / "chroma.sqlite3").exists():
            print(f"{store} is not built (bench/collections.py); skipped", file=sys.stderr)
            continue
        engine = Engine(Settings(storage=store))
        judge = Judge(engine)
        if size == "seeds":
            rows = [q for q in read_jsonl(ROOT / "tests/data/dev_questions.jsonl") if q["kind"] in ("summary", "compare")]
        else:
            rows = [q for q in read_jsonl(ROOT / "bench/data/relevance_questions.jsonl")
                    if q["mode"] in ("summary", "compare")]
        jobs = [(q["id"], q["question"], q.get("mode") or q["kind"], locked(q["id"])) for q in rows]
        if size == "3000":  # every labelled paper compared with the next one (by doc_id)
            labelled = sorted({r["doc_id"] for r in read_jsonl(ROOT / "bench/data/sentence_roles.jsonl")})
            for d in labelled:  # and the area of each labelled paper, named by its title
                jobs.append((f"area-{d}", f"Summarize the work on {engine.papers[d].title}", "summary", False))
            for a, b in zip(labelled[::2], labelled[1::2]):
                titles = [engine.papers[d].title for d in (a, b)]
                jobs.append((f"pair-{a}-{b}", f"Compare {titles[0]} and {titles[1]}", "compare", False))
        report[size] = measure(engine, judge, jobs, size, sink)
        print(size, json.dumps(report[size], indent=1), flush=True)
    out = ROOT / "bench" / "results" / f"writing-{args.tag}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    if args.headings:
        args.headings.write_text("".join(json.dumps(r) + "\n" for r in sink))
    return 0


if __name__ == "__main__":
    sys.exit(main())
