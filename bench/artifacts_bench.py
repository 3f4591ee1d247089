"""The artifact trail across rolling compactions of the dataset's agent traces.

    python bench/artifacts_bench.py [--windows 8000,32000] [--sessions N] [--paths extractive,model]
                                    [--ratio R]

Each agent trace of the shared dataset (SWE-agent, mini-swe-agent, OpenHands,
tau-bench) is cut into five chunks of about as many messages; chunk k is
appended and compacted (`engine.summarise` on `turns.plan_for_settings` with
`force`, the previous summary rolled on), five times, with the service's
default settings at each context window. Each compaction runs twice,
alternated session by session: with the `artifacts` section at its default
share (`artifacts_ratio`, or `--ratio`) and with it off (`artifacts_ratio` 0), on the
extractive path (no model) and on the model path (tests/support/fakellm.py "normal":
a deterministic stand-in that copies range lines into its summary, so it keeps
far more than a real model would; its figures without the section are an upper
bound, not a baseline).

Measured after 1, 2, 3 and 5 compactions:

- trail kept: of the artifacts the compacted ranges produced (`range_artifacts`
  of each range, rolled, newest last), the share whose line is in the rendered
  summary; and of those that fit the section's share (the newest run
  `roll_artifacts` keeps), the share kept (should be all of them);
- paths kept: file paths in the compacted ranges' tool-call arguments (any key,
  found by `extract_identifiers`, not by the section's own rules), the share
  named anywhere in the summary;
- numbers kept: numbers of 3+ digits that a tool output of the compacted ranges
  returned and the agent's later messages or calls (anywhere in the trace) use,
  the share named anywhere in the summary;
- tokens: the summary's, and the section's own share of them.

And the CPU of reading the trail off a whole trace (`range_artifacts`), next to
that of the identifiers every compaction already reads (`identifiers_to_keep`),
alternated trace by trace, in ms per 1,000 characters of the trace.

Pure engine, no database, no HTTP except the fake model's loopback socket.
Tables go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/artifacts_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction.artifacts import (
    decode,
    range_artifacts,
    render_artifacts,
    roll_artifacts,
)
from app.compaction.checks import identifiers_to_keep, message_texts
from app.compaction.engine import summarise
from app.compaction.model_client import ChatModelClient
from app.compaction.signals import extract_identifiers, normalise
from app.compaction.turns import CompactionPlan, plan_for_settings
from app.core.conversation import LoggedMessage, call_function
from app.core.settings import CompactionSettings
from app.core.tokens import get_counter
from bench.common import DATASET, load_average, machine_info, markdown_table
from tests.support.compaction_builders import log_of
from tests.support.fakellm import FakeLLM

CHECKPOINTS = (1, 2, 3, 5)
ROUNDS = 5
_NUMBER = re.compile(r"(?<![\w.])\d{3,}(?:\.\d+)?(?![\w])")
_PATHISH = re.compile(r"/|\.[A-Za-z][A-Za-z0-9]{0,7}$")


def agent_traces(limit: int | None) -> list[dict[str, Any]]:
    with DATASET.open(encoding="utf-8") as fh:
        sessions = [json.loads(line) for line in fh]
    agents = [s for s in sessions if s["meta"]["kind"] == "agent"]
    return agents[:limit] if limit else agents


def _args_values(m: LoggedMessage) -> list[str]:
    out = []
    for call in m.body.get("tool_calls") or ():
        raw = (call_function(call) or ("", ""))[1]
        try:
            parsed = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        stack = [parsed]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif item is not None:
                out.append(str(item))
    return out


def call_paths(messages: Sequence[LoggedMessage]) -> set[str]:
    """File paths in tool-call arguments: identifiers with a slash or a file extension."""
    return {
        ident
        for m in messages
        for value in _args_values(m)
        for ident in extract_identifiers(value)
        if _PATHISH.search(ident) and len(ident) <= 200
    }


def reused_numbers(log: Sequence[LoggedMessage], upto: int) -> set[str]:
    """Numbers a tool output at or below seq `upto` returned that the agent uses afterwards."""
    found: set[str] = set()
    for i, m in enumerate(log):
        if m.seq > upto:
            break
        if m.role != "tool":
            continue
        before = " ".join(x.text + " ".join(_args_values(x)) for x in log[:i] if x.role != "tool")
        after = " ".join(
            x.text + " ".join(_args_values(x)) for x in log[i + 1 :] if x.role == "assistant"
        )
        for n in set(_NUMBER.findall(m.text)):
            if not re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", before) and re.search(
                rf"(?<![\w.]){re.escape(n)}(?![\w])", after
            ):
                found.add(n)
    return found


def _text(item: str) -> str:
    a = decode(item)
    return a.text if a is not None else item


def share(kept: int, total: int) -> float | None:
    return kept / total if total else None


async def one_series(
    log: list[LoggedMessage],
    settings: CompactionSettings,
    client: ChatModelClient | None,
    counter: Any,
    numbers_at: dict[int, set[str]],
) -> dict[int, dict[str, Any]]:
    """Five compactions over the trace's chunks; what each checkpoint shows."""
    n = len(log)
    cuts = [round(n * k / ROUNDS) for k in range(1, ROUNDS + 1)]
    watermark, previous = 0, None
    rendered, tokens, lang = "", 0, "en"
    produced: list[str] = []
    ranges: list[LoggedMessage] = []
    out: dict[int, dict[str, Any]] = {}
    done = 0
    for k, cut in enumerate(cuts, start=1):
        history = [m for m in log[:cut] if m.seq > watermark]
        plan = plan_for_settings(
            history, watermark=watermark, settings=settings, usable_budget=settings.usable_budget
        ) if history else None  # fmt: skip
        if isinstance(plan, CompactionPlan):
            outcome = await summarise(
                plan, previous, [], client=client, settings=settings, counter=counter
            )
            previous, watermark, done = outcome.summary, plan.new_watermark, done + 1
            produced = list(
                roll_artifacts(
                    produced,
                    range_artifacts(plan.range_messages, plan.preserved_messages),
                    max_tokens=10**9,
                    counter=counter,
                )[0]
            )
            ranges.extend(plan.range_messages)
            rendered, tokens = outcome.rendered_text, outcome.summary_tokens
            lang = outcome.language
        if k not in CHECKPOINTS or previous is None:
            continue
        text = normalise(rendered)
        lines = set(rendered.splitlines())
        fit = roll_artifacts(
            (),
            produced,
            max_tokens=int(settings.artifacts_ratio * settings.usable_budget),
            counter=counter,
        )[0]
        shown = [a for a in produced if "- " + _text(a) in lines]
        paths = call_paths(ranges)
        numbers = numbers_at.setdefault(watermark, reused_numbers(log, watermark))
        section = "\n".join(render_artifacts(previous.artifacts, lang))
        out[k] = {
            "compactions": done,
            "produced": len(produced),
            "kept": len(shown),
            "fit": len(fit),
            "fit_kept": sum(a in shown for a in fit),
            "paths": len(paths),
            "paths_kept": sum(normalise(p) in text for p in paths),
            "numbers": len(numbers),
            "numbers_kept": sum(n in rendered for n in numbers),
            "summary_tokens": tokens,
            "section_tokens": counter.count_text(section) if section else 0,
        }
    return out


def cpu_table(traces: Sequence[dict[str, Any]], repeats: int = 3) -> str:
    spent = {"range_artifacts": 0.0, "identifiers_to_keep": 0.0}
    chars = 0
    for _ in range(repeats):
        for i, trace in enumerate(traces):
            log = log_of(trace["messages"])
            chars += sum(len(m.text) for m in log)
            for name in list(spent) if i % 2 == 0 else list(spent)[::-1]:
                start = time.process_time()
                if name == "range_artifacts":
                    range_artifacts(log)
                else:
                    identifiers_to_keep(message_texts(log), [])
                spent[name] += time.process_time() - start
    rows = [[name, f"{1e3 * t / chars * 1000:.2f}"] for name, t in spent.items()]
    return markdown_table(["over whole traces", "CPU ms per 1,000 chars"], rows)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", default="8000,32000")
    ap.add_argument("--sessions", type=int, default=None)
    ap.add_argument("--paths", default="extractive,model")
    ap.add_argument("--ratio", type=float, default=None, help="artifacts_ratio of the 'on' arm")
    args = ap.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    paths = args.paths.split(",")
    counter = get_counter("gpt-4o")
    traces = agent_traces(args.sessions)
    # (window, path, arm, checkpoint) -> list of per-session rows
    rows: dict[tuple[int, str, str, int], list[dict[str, Any]]] = defaultdict(list)
    started = time.perf_counter()
    async with FakeLLM() as llm:
        client = ChatModelClient(base_url=llm.base_url, model="fake", api_key="k", max_retries=0)
        try:
            for i, trace in enumerate(traces):
                log = log_of(trace["messages"])
                numbers_at: dict[int, set[str]] = {}
                arms = ["on", "off"] if i % 2 == 0 else ["off", "on"]  # alternated
                for window in windows:
                    for path in paths:
                        for arm in arms:
                            base = CompactionSettings(context_limit=window)
                            ratio = 0.0 if arm == "off" else args.ratio
                            settings = (
                                base
                                if ratio is None
                                else base.model_copy(update={"artifacts_ratio": ratio})
                            )
                            series = await one_series(
                                log,
                                settings,
                                client if path == "model" else None,
                                counter,
                                numbers_at,
                            )
                            for k, row in series.items():
                                rows[(window, path, arm, k)].append(row)
                print(
                    f"[{i + 1}/{len(traces)}] {trace['id']} ({time.perf_counter() - started:.0f}s)",
                    file=sys.stderr,
                )
        finally:
            await client.aclose()

    print(f"# Artifact trail over {len(traces)} agent traces of the dataset\n")
    print(f"Machine: {machine_info()}; load {load_average()}; default settings otherwise.\n")
    headers = [
        "window",
        "path",
        "section",
        "after",
        "sessions",
        "trail kept",
        "of those that fit",
        "paths kept",
        "numbers kept",
        "summary tokens",
        "section tokens",
    ]
    table = []

    def ratio_of(arm: str) -> str:
        if arm == "off":
            return "ratio 0"
        return f"ratio {args.ratio:g}" if args.ratio is not None else "default"

    for (window, path, arm, k), per in sorted(rows.items()):
        total = {key: sum(r[key] for r in per) for key in per[0]}

        def pct(a: str, b: str, t: dict[str, int] = total) -> str:
            s = share(t[a], t[b])
            return "n/a" if s is None else f"{100 * s:.1f}% ({t[a]}/{t[b]})"

        table.append(
            [
                window,
                path,
                f"{arm} ({ratio_of(arm)})",
                k,
                len(per),
                pct("kept", "produced") if arm == "on" else "-",
                pct("fit_kept", "fit") if arm == "on" else "-",
                pct("paths_kept", "paths"),
                pct("numbers_kept", "numbers"),
                round(total["summary_tokens"] / len(per)),
                round(total["section_tokens"] / len(per)),
            ]
        )
    print(markdown_table(headers, table))
    print(
        "\nsessions: traces with at least one compaction by then; tokens: mean per session; "
        "trail kept: artifact lines of the compacted ranges in the summary."
    )
    print()
    print(cpu_table(traces))


if __name__ == "__main__":
    asyncio.run(main())
