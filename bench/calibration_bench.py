"""How far the token estimate is from a provider's count, before and after calibration.

    python bench/calibration_bench.py [--dataset PATH]

Sessions of models without a local tokenizer (Claude, Gemini) are counted by
contextd's CJK-aware estimate. This replays the agent loop over every session of
the shared dataset: before each assistant message the agent sends the log so
far (system prompt included), contextd estimates it, the "provider" counts it,
and the agent reports that usage (`POST /sessions/{id}/usage` runs the same
`app.core.tokens.calibration.update`). For each call it records the relative error
of the uncalibrated estimate and of the calibrated estimate in force when the
call was made (the factor learnt from the earlier calls only, as a client sees
it), and how often the factor in force changed (each change re-fits the budget
and starts a new stable payload stream).

No Claude or Gemini tokenizer ships offline, so the providers here are the two
exact tokenizers contextd has, o200k_base and cl100k_base: the point is how
well a per-session factor absorbs a tokenizer the estimate was not fitted to,
per language. Pure computation, no database; prints a markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.core.tokens import REPLY_PRIMING, calibration
from app.core.tokens.counter import _counter_for
from bench.common import DATASET, markdown_table, percentile

ESTIMATE = _counter_for("estimate")


def replay(session: Mapping[str, Any], provider: Any) -> tuple[list[float], list[float], int]:
    """Errors per call (uncalibrated, calibrated) and the number of factor changes."""
    messages = list(session["messages"])
    if session.get("system"):
        messages.insert(0, {"role": "system", "content": session["system"]})
    # Tokens of the first n messages as one request, for every n.
    raw = [REPLY_PRIMING, *itertools.accumulate(ESTIMATE.count_message(m) for m in messages)]
    truth = [REPLY_PRIMING, *itertools.accumulate(provider.count_message(m) for m in messages)]
    state = calibration.Calibration()
    before: list[float] = []
    after: list[float] = []
    changes = 0
    for n, message in enumerate(messages):
        if message["role"] != "assistant" or n == 0:
            continue  # a call is made before each assistant message
        estimate, actual = raw[n], truth[n]
        before.append(abs(estimate / actual - 1))
        after.append(abs(calibration.calibrated(estimate, state.factor) / actual - 1))
        new = calibration.update(state, actual=actual, uncalibrated=estimate, applied=True)
        changes += new.factor != state.factor
        state = new
    return before, after, changes


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    args = parser.parse_args()
    sessions = [json.loads(line) for line in args.dataset.read_text().splitlines() if line]
    rows = []
    for name in ("o200k_base", "cl100k_base"):
        provider = _counter_for(name)
        for lang in ("en", "zh", "all"):
            group = [s for s in sessions if lang in ("all", s["meta"]["lang"])]
            before: list[float] = []
            after: list[float] = []
            changes: list[int] = []
            for session in group:
                b, a, c = replay(session, provider)
                before += b
                after += a
                changes.append(c)
            # The first call of a session has no report to learn from yet.
            warm = [a for s in group for a in replay(s, provider)[1][1:]]
            rows.append(
                [
                    name, lang, len(group), len(before),
                    pct(sum(before) / len(before)), pct(percentile(before, 90)),
                    pct(sum(after) / len(after)), pct(percentile(after, 90)),
                    pct(sum(warm) / len(warm)),
                    f"{sum(changes) / len(group):.1f}",
                ]
            )  # fmt: skip
    headers = [
        "provider tokenizer", "lang", "sessions", "calls",
        "uncalibrated mean |err|", "p90", "calibrated mean |err|", "p90",
        "calibrated, from 2nd call", "factor changes / session",
    ]  # fmt: skip
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
