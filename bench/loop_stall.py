"""How long a compaction's summary stalls the server's event loop, per range size.

    python bench/loop_stall.py [--sessions 5] [--repeat 3]

A server compacts in process by default, in the event loop that answers its
requests. For the dataset's largest sessions (`CONTEXTD_DATASET`, else
../shared/datasets/sessions.jsonl), each planned as a first compaction, this
times `summarise` with no model (the extractive summary) and with the fake
OpenAI-compatible model of the tests (`tests/support/fakellm.py`, a real HTTP server in
this process), while a task that only yields measures the loop's longest gap
between two of its turns: the longest a request would have waited to be read.

The row "in the loop" runs the same summary synchronously, as `summarise` did
before its CPU moved to a thread (the CPU work is the same, only where it runs
differs), so the two rows compare in one run on one machine. Medians of `--repeat`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction import engine, fit
from app.compaction.brief import brief_for
from app.compaction.llm import ChatModelClient
from app.compaction.outcome import ModelUsage
from app.compaction.turns import CompactionPlan, plan_range
from bench.common import DATASET, dataset_warning, load_average, machine_info, markdown_table
from tests.support.compaction_builders import COUNTER, EngineSettings, log_of
from tests.support.fakellm import FakeLLM
from tests.support.loop import watch_loop


async def _stall(work: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    """(seconds the work took, the longest gap between two turns of the loop meanwhile)."""
    _, loop = await watch_loop(work())
    return loop.took, loop.longest_gap


def _plans(n: int) -> list[tuple[str, CompactionPlan]]:
    sessions = [json.loads(line) for line in DATASET.open(encoding="utf-8")]
    sessions.sort(key=lambda s: -sum(len(json.dumps(m)) for m in s["messages"]))
    plans = []
    for s in sessions:
        plan = plan_range(log_of(s["messages"]), watermark=0, min_preserved_turns=2)
        if isinstance(plan, CompactionPlan):
            plans.append((str(s["id"]), plan))
        if len(plans) == n:
            break
    return plans


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sessions", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    if not DATASET.exists():
        sys.exit(dataset_warning().strip())
    settings = EngineSettings()

    def in_loop(plan: CompactionPlan) -> Callable[[], Awaitable[object]]:
        async def run() -> object:  # summarise before its CPU moved to a thread
            brief = brief_for(plan, None, [], settings, COUNTER, (), None)
            return fit.extractive(brief, ModelUsage(), "success", None)

        return run

    rows: list[list[Any]] = []
    async with FakeLLM() as llm, ChatModelClient(base_url=llm.base_url, model="fake") as client:
        for sid, plan in _plans(args.sessions):
            chars = sum(len(m.text) for m in plan.range_messages)
            cases: list[tuple[str, Callable[[], Awaitable[object]]]] = [
                ("extractive, in the loop (before)", in_loop(plan)),
                (
                    "extractive, off the loop",
                    lambda plan=plan: engine.summarise(  # type: ignore[misc]
                        plan, None, [], client=None, settings=settings, counter=COUNTER
                    ),
                ),
                (
                    "fake model, off the loop",
                    lambda plan=plan: engine.summarise(  # type: ignore[misc]
                        plan, None, [], client=client, settings=settings, counter=COUNTER
                    ),
                ),
            ]
            for name, work in cases:
                runs = [await _stall(work) for _ in range(args.repeat)]
                took = statistics.median(r[0] for r in runs)
                stall = statistics.median(r[1] for r in runs)
                rows.append([sid[:32], f"{chars:,}", name, took * 1e3, stall * 1e3])
    print(f"{machine_info()}; load average {load_average()}")
    print(f"medians of {args.repeat} runs; the dataset's {args.sessions} largest sessions\n")
    headers = ["session", "range chars", "summary", "summarise ms", "longest loop stall ms"]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    asyncio.run(main())
