"""Reading identifiers off texts: each pattern over whole texts against over the lines
that hold its needle, on the dataset's message texts and tool-call arguments.

    python bench/identifiers_bench.py [--repeat 3]

`extract_identifiers` (app/compaction/signals.py) is most of a compaction's CPU
outside the model call: `identifiers_to_keep` runs it over every message of the
range. Per kind of identifier the table gives the matches and the best of
`--repeat` timings of `finditer` over each whole text (after the substring gate,
as before needles) and over the lines `_lines_with` picks; then the whole
function against the same patterns run over whole texts with the pairwise
containment test (the code before 2026-11-24). Both must find the same matches
and return the same identifiers for every text: the bench counts the texts where
they differ (0, or it exits 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction import signals
from bench.common import DATASET, load_average, machine_info, markdown_table
from tests.support.identifiers import whole_text_identifiers

T = TypeVar("T")


def _texts() -> list[str]:
    if not DATASET.exists():
        sys.exit(f"dataset {DATASET} not found (set CONTEXTD_DATASET)")
    texts = []
    with DATASET.open(encoding="utf-8") as fh:
        for line in fh:
            for m in json.loads(line)["messages"]:
                if isinstance(m.get("content"), str) and m["content"]:
                    texts.append(m["content"])
                for tc in m.get("tool_calls") or []:
                    texts.append(tc["function"]["arguments"])
    return texts


def _best(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    out = fn()
    best = time.perf_counter() - started
    for _ in range(repeat - 1):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeat", type=int, default=3, help="timings per row (the best is shown)")
    args = p.parse_args()
    texts = _texts()
    chars = sum(map(len, texts))
    print(machine_info())
    print(f"load average {load_average()}; {len(texts):,} texts, {chars:,} characters ({DATASET})")
    print()
    rows: list[list[object]] = []
    differ = 0
    for i, kind in enumerate(signals._KINDS):
        gated = [t for t in texts if kind.present(t)]

        def whole(kind: signals._Kind = kind, gated: list[str] = gated) -> list[list[int]]:
            return [[m.start() for m in kind.pattern.finditer(t)] for t in gated]

        def lines(kind: signals._Kind = kind, gated: list[str] = gated) -> list[list[int]]:
            return [[m.start() for m in signals._matches(kind, t)] for t in gated]

        t_whole, a = _best(args.repeat, whole)
        t_lines, b = _best(args.repeat, lines)
        differ += a != b
        needle = kind.needle.pattern if kind.needle is not None else "(none: whole text)"
        n = sum(map(len, a))
        rows.append([i, kind.pattern.pattern[:44], needle[:28], n, t_whole * 1e3, t_lines * 1e3])
    print(
        markdown_table(
            ["#", "pattern", "needle", "matches", "whole texts ms", "needle lines ms"], rows
        )
    )
    t_before, before = _best(
        args.repeat, lambda: [whole_text_identifiers(t, gated=True) for t in texts]
    )
    t_after, after = _best(args.repeat, lambda: [signals.extract_identifiers(t) for t in texts])
    differ += sum(x != y for x, y in zip(before, after, strict=True))
    print()
    print(
        markdown_table(
            ["extract_identifiers", "ms", "ns per character"],
            [
                [
                    "whole texts, pairwise containment (before)",
                    t_before * 1e3,
                    t_before / chars * 1e9,
                ],
                ["needle lines, one search per value (now)", t_after * 1e3, t_after / chars * 1e9],
            ],
        )
    )
    print(f"\nratio ×{t_before / t_after:.2f}; texts or kinds where the two differ: {differ}")
    if differ:
        sys.exit(1)


if __name__ == "__main__":
    main()
