"""The name lookup alone, over the whole data file: no store, no vectors (bench/eval/names.py asks a built store).

    python -m bench.eval.names_lookup [--sizes 3000 22000]

A paper the lookup names is put first by retrieval and answered by grounding whatever its similarity
(rag_bot/retrieval/retrieve.py adds 1.0 to its fused score, more than any fused score; rag_bot/grounding/decide.py
answers a question that names a paper), so at a size whose store is not built yet the lookup says what the answers
will be: the records of ../shared/data/ml_abstracts.jsonl.gz (every 7th for 3000, as bench/collections.py takes
them; all 22,148 for 22000) read as an ingest reads them (their names, `Paper.aliases`), the name table and the
word statistics built as the lexicon builds them. Reported as bench/eval/names.py reports them: "What is NAME?" names
a paper of that name first, "Compare A and B." / "How does A differ from B?" names both, and the judged questions'
false name matches; locked part apart. Merged into bench/results/names.json as "lookup <size>".
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from bench.eval.names import DATA, QUESTIONS, RESULTS, _shuffled, read_jsonl, self_named, shares
from rag_bot.evaluation.split import locked  # the one locked split

EVERY = {3000: 7, 22000: 1}  # bench/collections.py SIZES


def collection(size: int) -> list:
    """The data file's records of a benchmark size as papers, named as an ingest names them."""
    from rag_bot.reading.records import make_paper

    papers = []
    with gzip.open(DATA, "rt", encoding="utf-8") as lines:
        for i, line in enumerate(lines):
            if i % EVERY[size] == 0:
                record = json.loads(line)
                papers.append(make_paper(record["id"], record["abstract"], "ml_abstracts", title=record["title"]))
    return papers


def lookup(papers: list):
    """A retrieval snapshot holding only the name table and the word statistics, and the stemmer it uses."""
    import bm25s
    import Stemmer

    from rag_bot.retrieval import retrieve
    from rag_bot.text import clean_markup

    stemmer = Stemmer.Stemmer("english")
    tokens = bm25s.tokenize([f"{p.title} {' '.join(p.aliases)} {clean_markup(p.text)}" for p in papers],
                            stopwords="en", stemmer=stemmer, show_progress=False)
    words = {i: w for w, i in tokens.vocab.items()}
    df: dict[str, int] = {}
    for row in tokens.ids:
        for i in set(row):
            df[words[i]] = df.get(words[i], 0) + 1
    snap = retrieve.Snapshot(names=retrieve.NameIndex.build(papers), df=df)

    def stem(text: str) -> list[str]:
        return list(bm25s.tokenize([text], stopwords="en", stemmer=stemmer, show_progress=False,
                                   return_ids=False)[0])

    def named(question: str) -> list[str]:  # as PaperRetriever.retrieve_papers asks
        long_question = len(question.split()) > retrieve.LONG_QUESTION_WORDS
        if not hasattr(retrieve, "Usage"):  # an engine before the title names (PYTHONPATH=/work/base)
            return snap.names.find(question, distinctive_only=long_question)
        return snap.names.find(question, distinctive_only=long_question,
                               usage=retrieve.Usage(df, len(papers), stem))

    return named


def measure(size: int) -> dict:
    """The lookup's figures at one size."""
    from rag_bot.text import normalize_name

    started = time.perf_counter()
    papers = collection(size)
    named = lookup(papers)
    titled = _shuffled(self_named({p.doc_id for p in papers}))
    holders: dict[str, set[str]] = {}
    for doc_id, name in titled:
        holders.setdefault(normalize_name(name), set()).add(doc_id)
    singles = []
    for doc_id, name in titled:
        got = named(f"What is {name}?")
        singles.append({"locked": locked(doc_id), "name": name,
                        "named first": bool(got) and got[0] in holders[normalize_name(name)]})
    distinct = [item for item in titled if len(holders[normalize_name(item[1])]) == 1]
    compared = []
    for n, ((a_id, a), (b_id, b)) in enumerate(zip(distinct[0::2], distinct[1::2])):
        question = f"Compare {a} and {b}." if n % 2 == 0 else f"How does {a} differ from {b}?"
        compared.append({"locked": locked(a_id), "question": question, "both named": {a_id, b_id} <= set(named(question))})
    targets = {q["id"]: set(q["target"]) for q in read_jsonl(QUESTIONS)}
    false = [{"id": q["id"], "question": q["question"], "named": [d for d in named(q["question"]) if d not in targets[q["id"]]]}
             for q in read_jsonl(QUESTIONS)]
    false = [f for f in false if f["named"]]
    return {
        "papers": len(papers), "self-named": len(titled), **shares(singles, "named first"),
        "comparisons": len(compared), **shares(compared, "both named"),
        "judged questions": len(targets), "false name matches": len(false), "false matches": false,
        "misses": [r["name"] for r in singles if not r["named first"]][:40],
        "pairs missed": [r["question"] for r in compared if not r["both named"]][:20],
        "seconds": round(time.perf_counter() - started, 1),
    }


def sweep(sizes: list[int], shares: list[float]) -> int:
    """Named first and false name matches for each value of COMMON_SHARE (the curve that set it)."""
    from rag_bot.retrieval import names

    for size in sizes:
        for share in shares:
            names.COMMON_SHARE = share
            got = measure(size)
            print(json.dumps({"size": size, "share": share} | {k: got[k] for k in (
                "named first (locked)", "named first (rest)", "both named (locked)", "both named (rest)",
                "false name matches")}))
    return 0


def main() -> int:
    """Measure each size; merge into bench/results/names.json."""
    import rag_bot

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", nargs="*", type=int, default=[3000, 22000])
    parser.add_argument("--label", default="", help="a label for the engine measured (e.g. base)")
    parser.add_argument("--share", type=float, nargs="*", default=[],
                        help="measure these values of names.COMMON_SHARE instead (nothing is written)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.share:
        return sweep(args.sizes, args.share)
    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    for size in args.sizes:
        got = {"engine": str(Path(rag_bot.__file__).parent.parent)} | measure(size)
        results[f"{args.label or 'current'} lookup {size}"] = got
        print(json.dumps({k: v for k, v in got.items() if not isinstance(v, list)}))
    args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
