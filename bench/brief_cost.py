"""CPU time of a compaction's brief (`brief_for`) on the long agent runs.

    python bench/brief_cost.py [--runs pi:badlogic/pi-mono:before-compaction] [--repeat 3]

Each run of `long-agent-runs.jsonl` (beside the dataset) named by `--runs` (a comma
list of ids; default: the largest) planned as a first compaction, as
`bench/loop_stall.py` plans them, and its brief built `--repeat` times: process CPU
seconds, the least of the repeats (the machine's other work moves wall time, less so
a process's own CPU time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction.brief import brief_for
from app.compaction.turns import CompactionPlan, plan_range
from bench.common import DATASET, markdown_table
from tests.support.compaction_builders import COUNTER, EngineSettings, log_of

LARGEST = "pi:badlogic/pi-mono:before-compaction"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=LARGEST)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    wanted = args.runs.split(",")
    rows = []
    with (DATASET.parent / "long-agent-runs.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            run = json.loads(line)
            if run["id"] not in wanted:
                continue
            plan = plan_range(log_of(run["messages"]), watermark=0, min_preserved_turns=2)
            if not isinstance(plan, CompactionPlan):
                continue
            spent = []
            for _ in range(args.repeat):
                start = time.process_time()
                brief_for(plan, None, [], EngineSettings(), COUNTER, (), None)
                spent.append(time.process_time() - start)
            rows.append([run["id"], len(plan.range_messages), f"{min(spent):.2f}"])
    print(markdown_table(["run", "range messages", "brief CPU s"], rows))


if __name__ == "__main__":
    main()
