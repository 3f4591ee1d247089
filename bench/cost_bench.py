"""What an agent pays for its input: prompt-cache stability of consecutive payloads.

    python bench/cost_bench.py [--budgets 8000,32000] [--strategies a,b] [--k 4]
                               [--limit N] [--database-url URL | --embedded]

An agent loop over every dataset session (`../shared/datasets`, with `k`
planted mid-run user instructions from `tests/support/planted.py`): before
every assistant message of the trace (a model call) the messages since the
previous call are appended to a contextd session (in-process app, a throwaway
PostgreSQL database) and the payload is asked for at each budget and strategy,
echoing the previous payload's `prefix_id`. Beside it, on the same calls:

- `<strategy> (no stability)`: the strategy alone (`assemble()` over the whole
  history, what contextd did before payload stability);
- `trim_messages`: LangChain's `trim_messages(strategy="last",
  include_system=True, start_on="human")`, same counter (budget - 3 for the
  reply priming it does not count).

Per method and budget, over all calls and over the *trimming calls* (those
whose whole history does not fit the budget; the same calls for every method):

- mean input tokens per call;
- stable share: input tokens that are a prefix of the previous call's payload
  (leading messages equal in both, counted with the exact o200k counter),
  measured by comparing the payloads, never read from contextd's counter;
- cost: input cost relative to no caching, cached tokens billed at 0.1x
  (Anthropic cache reads; OpenAI bills 0.1-0.5x by model and caches from 1,024
  tokens in 128-token steps, which this ignores; bench/agent_loop.py bills each
  provider by its own rules, Anthropic's breakpoints and 1.25x writes included);
- kept: planted mid-run instructions visible in the payloads of trimming calls
  (not counting the one that is the latest user message, which every method
  must send); tool-group violations: payloads the API would reject;
- `counter = measured`: share of calls where `usage.stable_prefix_tokens`
  equals the measured shared prefix (contextd with stability only).

The ceiling. The messages appended to the trace since the previous call point
were in no earlier payload, so they can never be part of a cached prefix; on a
trimming call they are a fixed cost every method pays in full. Two bounds on
the stable share of trimming calls follow, both printed:

- per budget, for any method whose payload fits the budget and sends the new
  messages whole: stable share <= 1 - sum(new tokens of the call, capped at the
  budget) / sum(budget), over the trimming calls (the first call of a session
  counts its whole history as new). On the dataset the new messages average
  ~670 tokens on trimming calls, ~8% of an 8,000 budget: a target of 95% stable
  at 8k is above what any such method can reach.
- per method, `ceiling (own inputs)`: 1 - sum(new)/sum(input) over that
  method's own trimming-call payloads, where `new` is the payload's trailing
  run of messages that occur nowhere in the method's previous payload (the new
  messages as the method sent them: whole, or as a tool-output preview). Those
  tokens cannot be in the shared prefix, so no payload of that method on those
  calls could have had a larger stable share; the gap between it and `stable,
  trimming` is what the method's own trims cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/cost_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from app.context import AssemblyRequest, assemble, available_strategies
from app.core.conversation import LoggedMessage
from bench.common import (
    DATASET,
    Throwaway,
    load_average,
    machine_info,
    markdown_table,
    throwaway_database,
)
from bench.context_quality import Case, load_cases, violations
from bench.replay import (
    CACHED_PRICE,
    COUNTER,
    MODEL,
    call_points,
    fresh_tail,
    full_tokens,
    mid_run,
    run_langchain,
    shared_prefix,
)

# A notional list price for the dollar figures: $3 per million input tokens, cache
# reads at a tenth (Claude Sonnet's published prices; cache writes ignored).
PRICE_PER_MTOK = 3.0


@dataclass
class Tally:
    calls: int = 0
    input_tokens: int = 0
    stable_tokens: int = 0
    trim_calls: int = 0
    trim_input: int = 0
    trim_stable: int = 0
    trim_fresh: int = 0
    instructions: int = 0
    instructions_kept: int = 0
    violations: int = 0
    counter_checked: int = 0
    counter_matches: int = 0
    mismatches: list[str] = field(default_factory=list)

    def add(self, tokens: int, stable: int, fresh: int, trimming: bool) -> None:
        self.calls += 1
        self.input_tokens += tokens
        self.stable_tokens += stable
        if trimming:
            self.trim_calls += 1
            self.trim_input += tokens
            self.trim_stable += stable
            self.trim_fresh += fresh


@dataclass
class Ceiling:
    """Per budget, over the trimming calls: new trace tokens (capped) against the budget."""

    calls: int = 0
    new_tokens: int = 0
    budget_tokens: int = 0

    def add(self, new: int, budget: int) -> None:
        self.calls += 1
        self.new_tokens += min(new, budget)
        self.budget_tokens += budget


def run_plain(case: Case, upto: int, budget: int, strategy: str) -> tuple[list[Any], int]:
    history = [
        LoggedMessage(seq=i + 1, id=str(i), role=m["role"], body=m, token_count=c)
        for i, (m, c) in enumerate(zip(case.messages[:upto], case.counts[:upto], strict=True))
    ]
    result = assemble(
        AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=budget,
            session_id="bench",
            system=case.system,
            preview_limit_tokens=2000,
            strategy=strategy,
        )
    )
    return list(result.messages), result.usage.input_tokens


def record(
    tally: Tally,
    case: Case,
    upto: int,
    trimming: bool,
    payload: list[dict[str, Any]],
    tokens: int,
    before: list[dict[str, Any]] | None,
) -> int:
    stable = shared_prefix(before, payload)
    tally.add(tokens, stable, fresh_tail(before, payload) if trimming else 0, trimming)
    tally.violations += violations(payload) > 0
    if trimming:
        present = mid_run(case, upto)
        tally.instructions += len(present)
        tally.instructions_kept += sum(ins.visible_in(payload) for ins in present)
    return stable


Tallies = dict[tuple[str, int], Tally]


async def run(args: argparse.Namespace, db: Throwaway) -> tuple[Tallies, dict[int, Ceiling], str]:
    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    configure_logging("json", "WARNING")
    overrides: dict[str, Any] = {"database_url": db.url}
    if args.ratio is not None:
        overrides["trim_target_ratio"] = args.ratio
    settings = load_settings(**overrides)
    cases = load_cases(args.dataset, k=args.k)[: args.limit or None]
    strategies = args.strategies or available_strategies()
    tallies: Tallies = {}
    ceilings = {budget: Ceiling() for budget in args.budgets}

    def tally(name: str, budget: int) -> Tally:
        return tallies.setdefault((name, budget), Tally())

    calls = sum(len(call_points(c.messages)) for c in cases)
    header = (
        f"contextd cost bench: {machine_info()}; {len(cases)} sessions of {args.dataset.name} "
        f"with {args.k} planted instructions each, {calls:,} model calls; model {MODEL} "
        f"(exact o200k_base counts); budgets {', '.join(f'{b:,}' for b in args.budgets)}; "
        f"trim target ratio {settings.trim_target_ratio}"
    )
    app = create_app(settings, database_url=db.url)
    started = time.perf_counter()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=120
        ) as c:
            for n, case in enumerate(cases):
                sid = f"cost-{n}-{uuid.uuid4().hex[:6]}"
                body: dict[str, Any] = {"model": MODEL, "auto_compact": False}
                if case.system:
                    body["system_prompt"] = case.system
                r = await c.put(f"/sessions/{sid}", json=body)
                r.raise_for_status()
                prev: dict[tuple[str, int], Any] = {}
                done = 0
                last_call = 0
                for upto in call_points(case.messages):
                    if upto > done:
                        r = await c.post(
                            f"/sessions/{sid}/messages",
                            json={"messages": case.messages[done:upto]},
                        )
                        if r.status_code != 201:
                            raise RuntimeError(f"{case.id}: append failed: {r.text}")
                        done = upto
                    whole = full_tokens(case, upto)
                    for budget in args.budgets:
                        trimming = whole > budget
                        if trimming:
                            ceilings[budget].add(sum(case.counts[last_call:upto]), budget)
                        for strategy in strategies:
                            key = (strategy, budget)
                            query: dict[str, Any] = {"max_tokens": budget, "strategy": strategy}
                            if key in prev:
                                query["previous_prefix_id"] = prev[key]["prefix_id"]
                            r = await c.get(f"/sessions/{sid}/context", params=query)
                            r.raise_for_status()
                            got = r.json()
                            t = tally(strategy, budget)
                            before = prev[key]["messages"] if key in prev else None
                            stable = record(
                                t,
                                case,
                                upto,
                                trimming,
                                got["messages"],
                                got["usage"]["input_tokens"],
                                before,
                            )
                            if before is not None:
                                t.counter_checked += 1
                                claimed = got["usage"]["stable_prefix_tokens"]
                                if claimed == stable:
                                    t.counter_matches += 1
                                elif len(t.mismatches) < 5:
                                    t.mismatches.append(f"{case.id}@{upto}: {claimed} vs {stable}")
                            prev[key] = got
                            if args.plain:
                                pkey = (f"{strategy} (no stability)", budget)
                                payload, tokens = run_plain(case, upto, budget, strategy)
                                record(
                                    tally(*pkey),
                                    case,
                                    upto,
                                    trimming,
                                    payload,
                                    tokens,
                                    prev.get(pkey),
                                )
                                prev[pkey] = payload
                        lkey = ("trim_messages", budget)
                        trimmed = run_langchain(case, upto, budget)
                        payload = trimmed.payload
                        record(
                            tally(*lkey),
                            case,
                            upto,
                            trimming,
                            payload,
                            trimmed.input_tokens,
                            prev.get(lkey),
                        )
                        prev[lkey] = payload
                    last_call = upto
                print(
                    f"[{time.perf_counter() - started:.0f}s] {n + 1}/{len(cases)} {case.id}",
                    file=sys.stderr,
                    flush=True,
                )
    return tallies, ceilings, header


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def cost(t: Tally, trim: bool = False) -> str:
    total, stable = (t.trim_input, t.trim_stable) if trim else (t.input_tokens, t.stable_tokens)
    if not total:
        return "-"
    return f"{(total - stable + CACHED_PRICE * stable) / total:.2f}"


def table(tallies: Tallies) -> str:
    headers = (
        "budget",
        "method",
        "calls (trimming)",
        "mean input",
        "stable, all",
        "stable, trimming",
        "ceiling (own inputs)",
        "cost, all",
        "cost, trimming",
        "instructions kept",
        "tool-group violations",
        "counter = measured",
    )
    rows = []
    for (name, budget), t in sorted(tallies.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows.append(
            (
                f"{budget:,}",
                name,
                f"{t.calls:,} ({t.trim_calls:,})",
                f"{t.input_tokens / t.calls:,.0f}" if t.calls else "-",
                pct(t.stable_tokens, t.input_tokens),
                pct(t.trim_stable, t.trim_input),
                pct(t.trim_input - t.trim_fresh, t.trim_input),
                cost(t),
                cost(t, trim=True),
                f"{pct(t.instructions_kept, t.instructions)} of {t.instructions}",
                t.violations,
                pct(t.counter_matches, t.counter_checked) if t.counter_checked else "",
            )
        )
    return markdown_table(headers, rows)


def ceiling_lines(ceilings: dict[int, Ceiling]) -> str:
    lines = []
    for budget, c in sorted(ceilings.items()):
        if not c.calls:
            continue
        lines.append(
            f"- {budget:,}: {c.calls:,} trimming calls, new messages {c.new_tokens / c.calls:,.0f} "
            f"tokens per call (capped at the budget) = {pct(c.new_tokens, c.budget_tokens)} "
            f"of the budget; stable share <= {pct(c.budget_tokens - c.new_tokens, c.budget_tokens)}"
        )
    return "\n".join(lines)


def dollars(tallies: Tallies) -> str:
    lines = []
    for (name, budget), t in sorted(tallies.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        paid = (t.input_tokens - t.stable_tokens + CACHED_PRICE * t.stable_tokens) / 1e6
        lines.append(
            f"- {budget:,} / {name}: ${paid * PRICE_PER_MTOK:,.2f} for the {t.calls:,} calls "
            f"(${PRICE_PER_MTOK * t.input_tokens / 1e6:,.2f} without caching)"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budgets", default="8000,32000")
    p.add_argument("--strategies", default="", help="comma-separated; default every strategy")
    p.add_argument("--k", type=int, default=4, help="planted instructions per session")
    p.add_argument("--limit", type=int, default=0, help="first N sessions only")
    p.add_argument("--ratio", type=float, default=None, help="CONTEXTD_TRIM_TARGET_RATIO")
    p.add_argument("--no-plain", dest="plain", action="store_false", help="skip (no stability)")
    p.add_argument("--dataset", type=Path, default=DATASET)
    p.add_argument("--database-url", default=None)
    p.add_argument("--embedded", action="store_true", help="a private embedded PostgreSQL")
    args = p.parse_args(argv)
    args.budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    args.strategies = [s for s in args.strategies.split(",") if s.strip()]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    server = None if args.embedded else args.database_url or os.environ.get("CONTEXTD_DATABASE_URL")
    from app.db.engine import run_migrations

    load_start = load_average()
    started = time.perf_counter()
    with throwaway_database(server) as db:
        run_migrations(db.url)
        tallies, ceilings, header = asyncio.run(run(args, db))
    print(header)
    print(f"load average (1/5/15 min) at start {load_start}, at end {load_average()}")
    print()
    print(table(tallies))
    print()
    print(
        "Ceiling on trimming calls, for any method whose payload fits the budget and sends "
        "the new messages whole:"
    )
    print(ceiling_lines(ceilings))
    print()
    print(f"Input cost at ${PRICE_PER_MTOK}/M tokens, cache reads at {CACHED_PRICE}x:")
    print(dollars(tallies))
    bad = {k: t.mismatches for k, t in tallies.items() if t.mismatches}
    if bad:
        print()
        print("counter mismatches (first 5):", json.dumps({str(k): v for k, v in bad.items()}))
    print(f"\n{time.perf_counter() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
