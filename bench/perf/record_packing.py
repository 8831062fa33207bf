"""How the papers' records of the lexical cache are compressed (rag_bot/retrieval/lexical/papers.py): a sample of a
store's records as JSON lines, alone, zlib alone, and zlib primed with the collection's first 32 KB at levels 1, 6 and 9
(bytes a record, µs to pack and to unpack one). Results to bench/results/record_packing.json.

    .venv/bin/python -m bench.perf.record_packing /work/sim/store-1m [--records 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "record_packing.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    from rag_bot.retrieval.lexical import LexicalCache
    from rag_bot.retrieval.lexical.papers import record_of
    from rag_bot.settings import Settings
    from rag_bot.store.index import PaperIndex

    index = PaperIndex(Settings(storage=args.store))
    loaded = LexicalCache(index).cached()
    if loaded is None:
        raise SystemExit(f"{args.store} has no lexical cache of its current state: run `rag-bot stats` or an ask")
    ids = list(loaded.ids[:args.records])
    records = [record_of(loaded.papers[d]) for d in ids]
    head = next(i for i in range(len(records)) if sum(map(len, records[:i + 1])) >= lexicon_window()) + 1
    dictionary = b"".join(records[:head])[-lexicon_window():]  # as RecordWriter makes it
    rest = records[head:]  # the records the dictionary is not made of
    out = {"store": str(args.store), "records": len(rest), "load_start": os.getloadavg(),
           "raw_bytes": sum(map(len, rest)) / len(rest),
           "zlib_alone_bytes": sum(len(zlib.compress(r, 6)) for r in rest) / len(rest)}
    for level in (1, 6, 9):
        base = zlib.compressobj(level, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, dictionary)
        start = time.perf_counter()
        packed = []
        for r in rest:
            c = base.copy()
            packed.append(c.compress(r) + c.flush())
        pack_us = (time.perf_counter() - start) / len(rest) * 1e6
        reader = zlib.decompressobj(-15, dictionary)
        start = time.perf_counter()
        for p in packed:
            reader.copy().decompress(p)
        out[f"level_{level}"] = {"bytes": sum(map(len, packed)) / len(packed), "pack_us": pack_us,
                                 "unpack_us": (time.perf_counter() - start) / len(packed) * 1e6}
    out["load_end"] = os.getloadavg()
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


def lexicon_window() -> int:
    from rag_bot.retrieval.lexical.papers import WINDOW

    return WINDOW


if __name__ == "__main__":
    sys.exit(main())
