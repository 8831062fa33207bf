"""The certainty model (rag_bot/grounding/certainty.py): how sure an answer says it is, a logistic over the question's
evidence with a selective-prediction (risk-coverage) choice of cuts per collection size, fitted on the fit part and
reported on the locked part beside it.

    python -m bench.fit.certainty [--sizes 38 3000 22000] [--write]

Every labelled question record of bench/fit/relevance.py (the dev set on the seeds; the judged questions, generated
known items and their near misses, the readers' one-paper questions and their near misses among real distractors)
gets the shipped relevance model's probabilities and its row of `QUESTION_FEATURES`. Per family (a direct answer, an
area), one logistic is fitted on every size's fit questions that name no paper (answerable or not); a question's
evidence is its probability. Per size and family, on the fit part only:

- the tentative cut (below it an answer says "none", nothing is close) is the highest at which at most
  `RISK_NONE` of the answerable questions fall below it: the risk of telling a user the collection lacks what it holds;
- the confident cut is the lowest, at or over the tentative one, at which at most `RISK_CONFIDENT` of the questions
  the collection does not answer reach it and the confident answers' first source is right at least
  `CONFIDENT_RIGHT` of the time: the risk of claiming what is not so;
- the related cut (an area's): the highest at which a summary's close and possibly related papers, together, recall
  `RELATED_RECALL` of the relevant papers (each list capped as grounding caps it).

Only with `--write` is the model saved to rag_bot/grounding/certainty_model.json (a SHIPPED model), with the
measurement that chose its cuts. bench/results/certainty.json has both parts' figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.fit.relevance import L2, PAPERS, load_records
from bench.fitting import tell_shipped
from rag_bot.evaluation.split import locked

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "certainty.json"
# The bars on the locked part (a question the collection answers told none; one it does not answer told
# confident: at most 3 %; confident answers right: at least 0.95), fitted with a margin on the fit part so that the
# locked part's noise leaves them met more often than not.
RISK_NONE = 0.02
RISK_CONFIDENT = 0.02
CONFIDENT_RIGHT = 0.95
RELATED_RECALL = 0.9
GRID = np.round(np.arange(0.005, 1.0, 0.005), 3)
# A size's fit part too small to place a cut (fewer answerable or unanswerable questions than these, as the seeds'
# ten summary questions, none unanswerable) is pooled with the next larger size's.
MIN_ANSWERABLE, MIN_UNANSWERABLE = 20, 10


@dataclasses.dataclass(frozen=True)
class Question:
    """What the cuts need of one labelled question: its evidence, whether the collection answers it, whether its
    most probable paper is right, and (an area) its candidates' probabilities and relevant papers."""

    size: int
    family: str
    source: str  # the set it comes from (dev, judged, known, near miss, reader, reader miss)
    locked: bool
    kind: str
    answerable: bool
    named: bool
    signals: tuple[float, ...]
    first_right: bool
    evidence: float = 0.0  # the certainty model's probability (set once it is fitted)
    probabilities: tuple[tuple[str, float], ...] = ()
    relevant: frozenset[str] = frozenset()


def questions(records: list[dict]) -> list[Question]:
    """Each record as a `Question`, its probabilities from the shipped model."""
    from rag_bot.grounding.certainty import question_signals
    from rag_bot.grounding.relevance import load

    model = load()
    out = []
    for r in records:
        if not r["rows"]:
            p = np.zeros(0)
        else:
            p = model.probabilities(np.asarray(r["rows"]), r["mode"])
        prob = [1.0 if named else float(x) for x, named in zip(p, r["named"])]
        order = sorted(range(len(prob)), key=lambda i: -prob[i])
        relevant = frozenset(r["relevant"])
        out.append(Question(size=r["size"], family=model.family(r["mode"]), source=r["source"],
                            locked=locked(r["qid"]), kind=r["kind"],
                            answerable=bool(r["answerable"]), named=any(r["named"]),
                            signals=tuple(question_signals(np.asarray(r["rows"]), p).tolist()) if r["rows"] else
                            (0.0,) * 5,
                            first_right=bool(order) and r["ids"][order[0]] in relevant,
                            probabilities=tuple((r["ids"][i], prob[i]) for i in order), relevant=relevant))
    return out


def certainty(q: Question, tentative: float, confident: float) -> str:
    """The certainty an answer to this question reports at these cuts."""
    if q.named or q.evidence >= confident:
        return "confident"
    return "tentative" if q.evidence >= tentative else "none"


def measure(qs: list[Question], tentative: float, confident: float) -> dict:
    """Selective answering at these cuts: the share of each certainty and how often it is right, and the two ways of
    being told wrong."""
    said = [certainty(q, tentative, confident) for q in qs]
    answerable = [q.answerable for q in qs]
    out: dict = {"questions": len(qs), "answerable": int(sum(answerable))}
    for level in ("confident", "tentative", "none"):
        mine = [q for q, s in zip(qs, said) if s == level]
        right = [(q.answerable and q.first_right) if level != "none" else not q.answerable for q in mine]
        out[level] = {"share": round(len(mine) / max(len(qs), 1), 3),
                      "right": round(float(np.mean(right)), 3) if right else None}
    held = [s for q, s in zip(qs, said) if q.answerable]
    lacking = [s for q, s in zip(qs, said) if not q.answerable]
    out["answerable told none"] = round(held.count("none") / len(held), 3) if held else None
    out["unanswerable told confident"] = round(lacking.count("confident") / len(lacking), 3) if lacking else None
    out["confident coverage of answerable"] = round(held.count("confident") / len(held), 3) if held else None
    return out


def worst(qs: list[Question], told: Callable[[Question], bool]) -> float:
    """The highest share of questions `told` is true of, over the sets the questions come from (each set's own
    risk is bounded, not only the pooled one: the generated titles would otherwise hide the readers' wording)."""
    shares = [float(np.mean([told(q) for q in qs if q.source == source])) for source in {q.source for q in qs}]
    return max(shares) if shares else 0.0


def fit_cuts(qs: list[Question]) -> tuple[float, float]:
    """The tentative and confident cuts of one size and family, on its fit part (see the module's docstring): each
    set's risk within its bound."""
    held = [q for q in qs if q.answerable and not q.named]
    lacking = [q for q in qs if not q.answerable and not q.named]
    tentative = float(GRID[0])
    for cut in GRID:
        if held and worst(held, lambda q, cut=cut: q.evidence < cut) > RISK_NONE:
            break
        tentative = float(cut)
    confident = float(GRID[-1])
    for cut in GRID[GRID >= tentative]:
        over = [q for q in qs if not q.named and q.evidence >= cut]
        told = worst(lacking, lambda q, cut=cut: q.evidence >= cut) if lacking else 0.0
        right = float(np.mean([q.answerable and q.first_right for q in over])) if over else 1.0
        if told <= RISK_CONFIDENT and right >= CONFIDENT_RIGHT:
            confident = float(cut)
            break
    return tentative, confident


def related_lists(q: Question, source: float, related: float) -> tuple[list[str], list[str]]:
    """A confident summary's close papers and its possibly related ones at these cuts (grounding's caps)."""
    from rag_bot.grounding.decide import AREA_PAPERS, RELATED_LIMIT

    close = [d for d, p in q.probabilities if p >= source][:AREA_PAPERS] or [d for d, _ in q.probabilities[:1]]
    rest = [d for d, p in q.probabilities if d not in close and p >= related]
    return close, rest[:RELATED_LIMIT]


def summary_figures(qs: list[Question], source: float, related: float) -> dict:
    """Recall of close + possibly related, the close part's precision, and the lists' lengths, over the area
    questions that have relevant papers."""
    rows = []
    for q in qs:
        if q.family != "area" or not q.relevant:
            continue
        close, rest = related_lists(q, source, related)
        rows.append((len(q.relevant & set(close + rest)) / len(q.relevant),
                     len(q.relevant & set(close)) / max(len(close), 1), len(close), len(rest)))
    if not rows:
        return {"questions": 0}
    a = np.asarray(rows)
    return {"questions": len(rows), "recall close+related": round(float(a[:, 0].mean()), 3),
            "precision close": round(float(a[:, 1].mean()), 3),
            "close papers": round(float(a[:, 2].mean()), 1), "related papers": round(float(a[:, 3].mean()), 1)}


def fit_related(qs: list[Question], source: float) -> float:
    """The highest related cut at which close + related recall `RELATED_RECALL` on the fit part (the lowest on the
    grid when no cut does: the caps then bound the list)."""
    best = float(GRID[0])
    for cut in GRID[GRID < source][::-1]:
        figures = summary_figures(qs, source, float(cut))
        if figures["questions"] and figures["recall close+related"] >= RELATED_RECALL:
            return float(cut)
    return best


def fit_weights(qs: list[Question]):
    """The certainty logistic of one family, on its fit questions that name no paper (every size)."""
    from bench.fitting import fit_logistic
    from rag_bot.fitted import Weights

    chosen = [q for q in qs if not q.named and not q.locked]
    x = np.asarray([q.signals for q in chosen])
    y = np.asarray([1.0 if q.answerable else 0.0 for q in chosen])
    mean, scale = x.mean(axis=0), np.maximum(x.std(axis=0), 1e-6)
    weights, bias = fit_logistic((x - mean) / scale, y, L2)
    return Weights(mean=tuple(round(float(v), 6) for v in mean), scale=tuple(round(float(v), 6) for v in scale),
                   weights=tuple(round(float(v), 6) for v in weights), bias=round(bias, 6))


def main() -> int:
    from rag_bot.fitted import record
    from rag_bot.grounding.certainty import MODEL_FILE, CertaintyModel
    from rag_bot.grounding.relevance import load

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="*", type=int, default=[38, 3000, 22000])
    parser.add_argument("--generated", type=int, default=300)
    parser.add_argument("--write", action="store_true", help="save the cuts into the SHIPPED relevance model")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    model = load()
    qs = questions(load_records(args.sizes, ("known", "judged", "readers", "dev"), args.generated))
    functions = {family: fit_weights([q for q in qs if q.family == family]) for family in ("ask", "area")}
    qs = [dataclasses.replace(q, evidence=float(functions[q.family].probabilities(np.asarray([q.signals]))[0]))
          for q in qs]
    cuts: dict[str, dict[str, list[list[float]]]] = {f: {"confident": [], "tentative": [], "related": []}
                                                    for f in ("ask", "area")}
    report: dict = {}
    for size in args.sizes:
        papers = PAPERS[size]
        for family in ("ask", "area"):
            mine = [q for q in qs if q.size == size and q.family == family]
            fit = [q for q in mine if not q.locked]
            if not fit:
                continue
            pool = fit
            for larger in [s for s in args.sizes if s > size]:
                if (sum(q.answerable for q in pool if not q.named) >= MIN_ANSWERABLE
                        and sum(not q.answerable for q in pool if not q.named) >= MIN_UNANSWERABLE):
                    break
                pool = pool + [q for q in qs if q.size == larger and q.family == family and not q.locked]
            tentative, confident = fit_cuts(pool)
            source = model.cut(family, "source", papers)
            related = fit_related(fit, source) if family == "area" else source
            cuts[family]["tentative"].append([papers, tentative])
            cuts[family]["confident"].append([papers, confident])
            if family == "area":
                cuts[family]["related"].append([papers, related])
            report[f"{size} {family}"] = {
                "cuts": {"tentative": tentative, "confident": confident, "related": related, "source": source},
                "fitted on": len(pool),
                **{part: {**measure([q for q in mine if q.locked == (part == "locked")], tentative, confident),
                          "summaries": summary_figures([q for q in mine if q.locked == (part == "locked")], source,
                                                       related)}
                   for part in ("fit", "locked")}}
            print(f"{size} {family}: {json.dumps(report[f'{size} {family}'])}", file=sys.stderr)
    args.results.write_text(json.dumps(report, indent=1) + "\n")
    if args.write:
        fitted_on = (f"bench/fit/certainty.py: a logistic per family on the fit part's questions naming no paper at "
                     f"{args.sizes} papers; risk-coverage cuts per size (answerable told none <= {RISK_NONE}, "
                     f"unanswerable told confident <= {RISK_CONFIDENT}, confident right >= {CONFIDENT_RIGHT}, "
                     f"summaries' recall {RELATED_RECALL})")
        data = [ROOT / "bench" / "data" / "relevance_pairs.jsonl", ROOT / "bench" / "data" / "relevance_questions.jsonl",
                ROOT / "tests" / "data" / "dev_questions.jsonl"]
        shipped = CertaintyModel(ask=functions["ask"], area=functions["area"],
                                 cuts={f: {k: v for k, v in c.items() if v} for f, c in cuts.items()},
                                 provenance=record("bench/fit/certainty.py", data, fitted_on),
                                 measured={k: {"cuts": v["cuts"], "fit": v["fit"]} for k, v in report.items()})
        MODEL_FILE.write_text(shipped.to_json(), encoding="utf-8")
    tell_shipped(MODEL_FILE, args.write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
