"""Cold window assemblies for an instruction count, which the machine's load does not change.

    valgrind --tool=callgrind --toggle-collect=functools_reduce \\
        python bench/cold_calls.py [--size 1000] [--calls 2] [--budget 32000]

The window of `bench/context_speed.py` at `--size` log messages, assembled `--calls`
times with key_messages, every call cold (no `Caches`: a fresh memo, as a new process
or a session not in the memo has). The calls run inside `functools.reduce`, so that
callgrind collects only them: the process's start, the dataset's tokens and a first
call (the expressions compiled, the tokenizer loaded) are not counted. Instructions per
cold call = callgrind's "Collected" / `--calls`.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.context import HISTORY_READ_FACTOR
from bench.context_speed import COUNTER, agent_messages, build_log, ours, window


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--budget", type=int, default=32000)
    args = parser.parse_args(argv)
    base = agent_messages()
    counts = [COUNTER.count_message(m) for m in base]
    win = window(build_log(base, counts, args.size), HISTORY_READ_FACTOR * args.budget)
    call = ours(win, args.budget, "key_messages")
    call()  # outside the count: what any process pays once

    def cold_calls(_a: object, _b: object) -> None:
        for _ in range(args.calls):
            call()

    functools.reduce(cold_calls, [None, None])
    print(f"{args.calls} cold calls over a window of {len(win)} messages ({args.size:,} logged)")


if __name__ == "__main__":
    main()
