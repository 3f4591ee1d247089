"""The append's search vector, made with its loops in C and in Python, in one run.

    python bench/vector_bench.py [--rounds 7] [--dataset PATH]

Times `app.index.vector.message_vector` over every message of the dataset
(`../shared/datasets/sessions.jsonl`), once with the C module
(`app/index/_vector.c`) and once with the Python twins of its loops, alternated,
the best of `--rounds` passes each (CPU time of this process). The caches are warm
after the first pass, as in a long-running server; a token longer than the cache
keeps (most of them runs of Chinese text with their punctuation) is split afresh
every time, in Python in both. Reported: µs per message, over all messages and
apart for those with such a token and those without; the vectors are checked to
be the same bytes. The table goes to stdout.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/vector_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.index import vector
from app.index.searchable import searchable_text
from bench.common import DATASET, load_messages

KEY = "~0123456789abcdef"


def _has_long_token(body: dict[str, Any]) -> bool:
    text = unicodedata.normalize("NFC", searchable_text(body))
    tokens = text.encode("utf-8", "surrogatepass").translate(vector._SPACES).split()
    return any(len(t) > vector._TOKEN_CACHED_BYTES for t in tokens)


def _best_us(messages: list[dict[str, Any]], rounds: int) -> tuple[float, list[bytes]]:
    made: list[bytes] = []
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        made = [vector.message_vector(m, KEY) for m in messages]
        best = min(best, time.process_time() - start)
    return best / max(1, len(messages)) * 1e6, made


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--dataset", type=Path, default=DATASET)
    args = p.parse_args()
    compiled = vector._compiled
    if compiled is None:
        print("app.index._vector is not built (see setup.py): nothing to compare")
        return 1
    messages = load_messages(args.dataset)
    long = [m for m in messages if _has_long_token(m)]
    short = [m for m in messages if not _has_long_token(m)]
    rows: list[tuple[str, int, float, float]] = []
    same = True
    for name, group in (("all", messages), ("with a long token", long), ("without", short)):
        times: dict[str, float] = {}
        made: dict[str, list[bytes]] = {}
        for way in ("Python", "C", "Python", "C"):  # alternated; the second pass counts
            vector._compiled = compiled if way == "C" else None
            times[way], made[way] = _best_us(group, args.rounds)
        vector._compiled = compiled
        same = same and made["C"] == made["Python"]
        rows.append((name, len(group), times["Python"], times["C"]))
    print(f"{platform.machine()}, Python {platform.python_version()}, {len(messages)} messages")
    print()
    print("| messages | count | Python µs/message | C µs/message | Python / C |")
    print("|:--|--:|--:|--:|--:|")
    for name, count, py, c in rows:
        print(f"| {name} | {count:,} | {py:.1f} | {c:.1f} | {py / c:.1f}x |")
    print()
    print("the same bytes both ways:", "yes" if same else "NO")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
