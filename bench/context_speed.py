"""In-process assembly latency at growing log sizes, against LangChain's `trim_messages`.

    python bench/context_speed.py [--sizes 1000,10000,100000] [--budget 32000]
                                  [--strategy key_messages] [--repeat 15]

Histories are agent-like: the agent sessions of the shared dataset cycled to N
messages (tool-call ids made unique per cycle), token counts cached as the
log caches them. Measured for each N, in one run on the same machine:

- ours, window: `assemble()` over what the repository hands over — the newest
  messages worth `HISTORY_READ_FACTOR x budget` tokens, the user message
  opening the oldest turn read, and whatever completes a tool group cut by the
  window's edge (the same rule as `app/context/repository.py`, minus the SQL).
  "cold" gives every call empty caches (app/context/caches.py), "warm" one
  `Caches` for all (the next call of an agent finds most of its window already
  scored and previewed);
- ours, full log: `assemble()` over all N messages (linear, for reference);
- LangChain: `trim_messages(strategy="last", include_system=True,
  start_on="human")` over the same window and over the full log, with a
  counter reading the same cached counts.

p50 in milliseconds; ratios are ours / LangChain on the same input.

`--repeats` measures instead what `key_messages`' rule on repeated tool outputs
(app/context/repeats.py) costs a call: the window's assembly with the rule and with
it switched off (no output's lines gathered or compared), alternated 8 times, cold and
warm, medians of 21 calls each.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/context_speed.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages, trim_messages

from app.context import HISTORY_READ_FACTOR, AssemblyRequest, assemble
from app.context.caches import Caches
from app.core.conversation import LoggedMessage
from app.core.tokens import get_counter
from bench.common import DATASET, cycled, load_average, machine_info, markdown_table, percentile

COUNTER = get_counter(None)
PRIMING = COUNTER.count_messages([])
SYSTEM = "You are a careful coding agent. Work in small steps and run the tests."


def agent_messages() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with DATASET.open(encoding="utf-8") as fh:
        for k, line in enumerate(fh):
            session = json.loads(line)
            if session["meta"]["kind"] == "agent":
                out.extend(cycled(session["messages"], len(session["messages"]), f"a{k}_"))
    return out


def build_log(base: list[dict[str, Any]], counts: list[int], n: int) -> list[LoggedMessage]:
    log = []
    for i, body in enumerate(cycled(base, n, "c")):
        log.append(
            LoggedMessage(
                seq=i + 1,
                id=str(i),
                role=body["role"],
                body=body,
                token_count=counts[i % len(base)],
            )
        )
    return log


def window(log: Sequence[LoggedMessage], read_tokens: int) -> list[LoggedMessage]:
    """The repository's read: newest messages worth `read_tokens`, the opening user
    message of the oldest turn read, and the call of a tool group cut by the edge."""
    total, start = 0, len(log)
    while start > 0 and total < read_tokens:
        start -= 1
        total += log[start].token_count
    while start > 0 and log[start].role == "tool":
        start -= 1  # complete the group whose results open the window
    extra = next((log[i] for i in range(start - 1, -1, -1) if log[i].role == "user"), None)
    return ([extra] if extra is not None else []) + list(log[start:])


def p50_ms(
    fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return percentile(times, 50)


def ours(
    history: Sequence[LoggedMessage], budget: int, strategy: str, caches: Caches | None = None
) -> Callable[[], object]:
    """One assembly; with `caches`, what the earlier calls kept there is reused (warm),
    without, every call starts empty (cold)."""
    request = AssemblyRequest(
        history=history,
        counter=COUNTER,
        budget=budget,
        session_id="bench",
        system=SYSTEM,
        strategy=strategy,
        history_from_seq=1,
        caches=caches,
    )
    return lambda: assemble(request)


def langchain(history: Sequence[LoggedMessage], budget: int) -> Callable[[], object]:
    msgs = [SystemMessage(SYSTEM, id="system"), *convert_to_messages([m.body for m in history])]
    counts = {"system": COUNTER.count_message({"role": "system", "content": SYSTEM})}
    for m, logged in zip(msgs[1:], history, strict=True):
        m.id = str(logged.seq)
        counts[m.id] = logged.token_count

    def counter(batch: list[BaseMessage]) -> int:
        return sum(counts[str(m.id)] for m in batch)

    return lambda: trim_messages(
        msgs,
        max_tokens=budget - PRIMING,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )


def repeats_cost(sizes: Sequence[int], budget: int, repeat: int) -> None:
    """The rule on repeated outputs on and off, alternated on the same windows."""
    import app.context.strategies.key_messages as km

    # The strategy's own name for it, patched there (not in app.context.repeats).
    with_rule = getattr(km, "output_lines")  # noqa: B009

    def without_rule(unit: Any, limit: int) -> list[frozenset[int]]:
        return []  # no output to compare: nothing gathered, nothing checked

    base = agent_messages()
    counts = [COUNTER.count_message(m) for m in base]
    rows = []
    for n in sizes:
        win = window(build_log(base, counts, n), HISTORY_READ_FACTOR * budget)
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(8):
            for rule, check in (("on", with_rule), ("off", without_rule)):
                setattr(km, "output_lines", check)  # noqa: B010
                for kind in ("cold", "warm"):
                    call = ours(win, budget, "key_messages", Caches() if kind == "warm" else None)
                    call()  # a warm run's first call fills its caches
                    times.setdefault((rule, kind), []).append(p50_ms(call, repeat))
        setattr(km, "output_lines", with_rule)  # noqa: B010
        for kind in ("cold", "warm"):
            on = percentile(times[("on", kind)], 50)
            off = percentile(times[("off", kind)], 50)
            rows.append([f"{n:,}", kind, off, on, f"{(on / off - 1) * 100:+.0f}%"])
    print(f"key_messages, budget {budget}; {machine_info()}; load {load_average()}\n")
    print(markdown_table(["log messages", "call", "rule off ms", "rule on ms", "on / off"], rows))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 10000, 100000]
    )
    parser.add_argument("--budget", type=int, default=32000)
    parser.add_argument("--strategy", default="key_messages")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--repeats", action="store_true", help="the repeated-output rule's cost")
    args = parser.parse_args(argv)
    if args.repeats:
        repeats_cost(args.sizes, args.budget, args.repeat)
        return

    base = agent_messages()
    counts = [COUNTER.count_message(m) for m in base]
    rows = []
    for n in args.sizes:
        log = build_log(base, counts, n)
        win = window(log, HISTORY_READ_FACTOR * args.budget)
        full_repeat = max(3, args.repeat if n <= 10_000 else args.repeat // 3)
        cold = p50_ms(ours(win, args.budget, args.strategy), args.repeat)
        warm = p50_ms(ours(win, args.budget, args.strategy, Caches()), args.repeat)
        full = p50_ms(ours(log, args.budget, args.strategy), full_repeat)
        lc_win = p50_ms(langchain(win, args.budget), args.repeat)
        lc_full = p50_ms(langchain(log, args.budget), full_repeat)
        rows.append(
            [f"{n:,}", len(win), cold, warm, full, lc_win, lc_full,
             f"{cold / lc_win:.0f}x / {warm / lc_win:.0f}x", f"{full / lc_full:.1f}x"]
        )  # fmt: skip
    headers = ["log messages", "window msgs", "ours window cold", "ours window warm",
               "ours full log", "LC window", "LC full log", "ours/LC window cold/warm",
               "ours/LC full"]  # fmt: skip
    print(
        f"strategy {args.strategy}, budget {args.budget} tokens (window reads "
        f"{HISTORY_READ_FACTOR}x), p50 of {args.repeat} runs in ms; {machine_info()}; "
        f"load {load_average()}\n"
    )
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
