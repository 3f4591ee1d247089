"""Inclusive share of each function in py-spy's collapsed stacks (`--format raw`).

    python bench/profile_top.py STACKS.txt [--match TEXT] [--top N]

`--match` keeps the stacks containing TEXT (e.g. "app.cli serve": the server's
processes); each function counts once per stack, so shares are inclusive.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("stacks", type=Path)
    p.add_argument("--match", default="")
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in args.stacks.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit() or args.match not in stack:
            continue
        n = int(count)
        total += n
        seen = set()
        for frame in stack.split(";"):
            if frame.startswith(("process ", "thread ")):
                continue  # py-spy's labels, not functions
            name, _, where = frame.partition(" (")
            key = f"{name} ({where.split(':')[0].rsplit('/', 1)[-1]}"
            if key not in seen:
                seen.add(key)
                inclusive[key] += n
    print(f"{total} samples")
    for key, n in inclusive.most_common(args.top):
        print(f"{100 * n / max(total, 1):5.1f}%  {key[:140]}")


if __name__ == "__main__":
    main()
