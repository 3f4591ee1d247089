"""The bill's cached tokens checked against a replay of each provider's caching rules.

    python bench/bill_replay.py [--budget 8000] [--limit N] [--long N] [--pause-every 7]
                                [--database-url URL | --embedded]

An agent loop drives a contextd app (in-process, a throwaway PostgreSQL database)
over the dataset's agent traces (and `--long N` of `long-agent-runs.jsonl`): before
each assistant message of a trace (a model call) the messages since the previous call
are appended and the payload asked for at `--budget`, echoing the previous
`prefix_id`. Every payload is recorded. Each trace runs twice, in two sessions, one
per provider: model `gpt-4o` (OpenAI's rules) and model `claude-sonnet-4-5` (a
`claude*` model: Anthropic's rules); both in the Chat Completions format, so that the
replay compares the same messages the server does. In the Anthropic session, before
every `--pause-every`-th call the clock of the server's payload calls is moved six
minutes on (`EventWriter.clock_offset_s`: the agent paused longer than the cache
lives), and the replay knows of those pauses.

The replay knows nothing of `usage`: for each payload it measures the tokens shared
with the stream's previous payload by comparing the recorded payloads (tools, when
unchanged, then each leading message equal in both, counted with the session
model's counter, as tests/context/test_stability.py does), then applies the provider's
documented rule itself: nothing is cached on a session's first call; OpenAI caches
nothing below 1,024 tokens and then whole steps of 128; Anthropic reads the whole
shared prefix (the breakpoint sits at its end) when the previous call was within
five minutes and the prefix reaches 1,024 tokens.
It prints, per provider, the session bill's `cached_input_tokens` (GET /sessions/{id},
summed over the traces) beside the replay's figure, and their difference (target: 2%).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    DATASET,
    check,
    database_options,
    database_server,
    markdown_table,
    throwaway_database,
)

PROVIDERS = {"openai": "gpt-4o", "anthropic": "claude-sonnet-4-5"}
OPENAI_MIN, OPENAI_STEP = 1024, 128
ANTHROPIC_MIN, ANTHROPIC_TTL_S = 1024, 300.0
PAUSE_S = 360.0


def replay_openai(shared: int, since_previous_s: float | None) -> int:
    if since_previous_s is None or shared < OPENAI_MIN:
        return 0  # no earlier call (nothing was cached), or below the minimum
    return OPENAI_MIN + (shared - OPENAI_MIN) // OPENAI_STEP * OPENAI_STEP


def replay_anthropic(shared: int, since_previous_s: float | None) -> int:
    if since_previous_s is None or since_previous_s > ANTHROPIC_TTL_S:
        return 0
    return shared if shared >= ANTHROPIC_MIN else 0


def shared_tokens(before: Mapping[str, Any] | None, after: Mapping[str, Any], model: str) -> int:
    """Tokens at the start of `after` identical to `before`: the tools when unchanged,
    then each leading message equal in both."""
    from app.core.tokens import get_counter

    if before is None or before["tools"] != after["tools"]:
        return 0
    counter = get_counter(model)
    tokens = counter.count_tools(after["tools"]) if after["tools"] else 0
    for a, b in zip(before["messages"], after["messages"], strict=False):
        if a != b:
            break
        tokens += counter.count_message(b)
    return tokens


@dataclass
class Figures:
    calls: int = 0
    input_tokens: int = 0
    server_per_call: int = 0  # the sum of usage.cached_input_tokens
    server_bill: int = 0  # stats.bill.cached_input_tokens
    replay: int = 0
    pauses: int = 0
    per_call_mismatches: int = 0
    full_history: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)


def load_traces(limit: int | None, long: int) -> list[dict[str, Any]]:
    with DATASET.open(encoding="utf-8") as fh:
        sessions = [json.loads(line) for line in fh if line.strip()]
    traces = [s for s in sessions if s["meta"]["kind"] == "agent"][: limit or None]
    if long:
        with (DATASET.parent / "long-agent-runs.jsonl").open(encoding="utf-8") as fh:
            traces += [json.loads(line) for line in fh if line.strip()][:long]
    return traces


async def settle(c: httpx.AsyncClient, sid: str, runner: Any) -> None:
    """Run the compaction jobs the appends queued (the app runs none by itself here) until
    the session has none left, as bench/agent_loop.py does."""
    from app.db.models.job import ACTIVE

    for _ in range(6000):
        while await runner.run_once():
            pass
        jobs = check(await c.get(f"/sessions/{sid}/compaction"), 200)["jobs"]
        if not any(j["status"] in ACTIVE for j in jobs):
            return
        await asyncio.sleep(0.02)
    raise RuntimeError(f"{sid}: compaction still running after two minutes")


async def run_trace(
    c: httpx.AsyncClient,
    app: Any,
    trace: Mapping[str, Any],
    n: int,
    args: argparse.Namespace,
    figures: dict[str, Figures],
) -> None:
    messages = trace["messages"]
    points = [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]
    for provider, model in PROVIDERS.items():
        f = figures[provider]
        sid = f"bill-{provider}-{n}"
        body: dict[str, Any] = {"model": model, "auto_compact": args.compaction}
        if args.compaction:  # compaction at 90% of the budget (no reserve, no margin)
            body["context_limit"] = args.budget
            body["compaction"] = {"reserved_output_tokens": 0, "safety_margin_tokens": 0}
        if trace.get("system"):
            body["system_prompt"] = trace["system"]
        check(await c.put(f"/sessions/{sid}", json=body), 200, 201)
        previous: dict[str, Any] | None = None
        prefix_id: str | None = None
        done = 0
        for k, upto in enumerate(points):
            batch = messages[done:upto]
            check(await c.post(f"/sessions/{sid}/messages", json={"messages": batch}), 201)
            done = upto
            since: float | None = None if previous is None else 0.0
            if provider == "anthropic" and previous is not None and k % args.pause_every == 0:
                # The agent pauses: the server's clock for payload calls moves on.
                app.state.events.clock_offset_s += PAUSE_S
                since = PAUSE_S
                f.pauses += 1
            query: dict[str, Any] = {"max_tokens": args.budget}
            if prefix_id is not None:
                query["previous_prefix_id"] = prefix_id
            got = check(await c.get(f"/sessions/{sid}/context", params=query), 200)
            prefix_id = got["prefix_id"]
            payload = {"messages": got["messages"], "tools": got["tools"]}
            shared = shared_tokens(previous, payload, model)
            replayed = (
                replay_openai(shared, since)
                if provider == "openai"
                else replay_anthropic(shared, since)
            )
            usage = got["usage"]
            f.calls += 1
            f.input_tokens += usage["input_tokens"]
            f.server_per_call += usage["cached_input_tokens"]
            f.full_history += usage["full_history_input_tokens"]
            f.replay += replayed
            f.per_call_mismatches += int(replayed != usage["cached_input_tokens"])
            if args.verbose and replayed != usage["cached_input_tokens"]:
                print(
                    f"{sid} call {k}: since {since} shared {shared} stable "
                    f"{usage['stable_prefix_tokens']} bill {usage['cached_input_tokens']} "
                    f"replay {replayed} prefix_id {got['prefix_id']} summary {got['summary']}",
                    file=sys.stderr,
                )
            previous = payload
            if args.compaction:  # a compaction the appends asked for ends in the model call
                await settle(c, sid, app.state.compactions)
        f.server_bill += check(await c.get(f"/sessions/{sid}"), 200)["stats"]["bill"][
            "cached_input_tokens"
        ]


async def run(args: argparse.Namespace, database_url: str) -> dict[str, Figures]:
    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    configure_logging("json", "WARNING")
    settings = load_settings(
        database_url=database_url,
        llm_base_url=None,
        llm_model=None,
        llm_api_key=None,
        api_keys=None,
        compaction_workers=1,
        run_compactions_in_process=False,  # settle() runs the jobs
    )
    traces = load_traces(args.limit, args.long)
    figures = {p: Figures() for p in PROVIDERS}
    app = create_app(settings, database_url=database_url)
    started = time.perf_counter()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=120
        ) as c:
            for n, trace in enumerate(traces):
                await run_trace(c, app, trace, n, args, figures)
                print(
                    f"[{time.perf_counter() - started:.0f}s] {n + 1}/{len(traces)} {trace['id']}",
                    file=sys.stderr,
                    flush=True,
                )
    return figures


def table(figures: Mapping[str, Figures]) -> str:
    rows: list[Sequence[object]] = []
    for provider, f in figures.items():
        diff = (f.server_bill - f.replay) / f.replay if f.replay else 0.0
        rows.append(
            (
                provider,
                f.calls,
                f.input_tokens,
                f.server_bill,
                f.server_per_call,
                f.replay,
                f"{diff:+.2%}",
                f.per_call_mismatches,
                f.pauses,
                f.full_history,
            )
        )
    return markdown_table(
        (
            "rules",
            "calls",
            "input tokens",
            "bill: cached",
            "Σ usage cached",
            "replay: cached",
            "bill vs replay",
            "calls that differ",
            "pauses > 5 min",
            "full history",
        ),
        rows,
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--budget", type=int, default=8000)
    p.add_argument("--limit", type=int, default=0, help="agent traces (0: all)")
    p.add_argument("--long", type=int, default=0, help="long agent runs to add")
    p.add_argument("--pause-every", type=int, default=7)
    p.add_argument(
        "--compaction",
        action="store_true",
        help="auto-compaction on (context_limit = the budget; extractive summaries)",
    )
    database_options(p)
    p.add_argument("--verbose", action="store_true", help="print each call that differs")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from app.db.migrate import run_migrations

    with throwaway_database(database_server(args), "contextd_bill") as db:
        run_migrations(db.url)
        figures = asyncio.run(run(args, db.url))
    print(
        f"Auto-compaction {'on' if args.compaction else 'off'}; budget {args.budget:,} "
        f"tokens; a pause of {PAUSE_S:.0f} s before every "
        f"{args.pause_every}th Anthropic call.\n"
    )
    print(table(figures))
    worst = max(
        abs(f.server_bill - f.replay) / f.replay if f.replay else 0.0 for f in figures.values()
    )
    return 0 if worst <= 0.02 else 1


if __name__ == "__main__":
    raise SystemExit(main())
