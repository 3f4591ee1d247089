"""What each strategy keeps of the user's words, against LangChain's `trim_messages`.

    python bench/context_quality.py [--budgets 2000,4000,8000,0.1,0.25,0.5] [--k 4]
                                    [--preview-limit 1024]

Every dataset session gets `k` mid-run user instructions from
`tests/support/planted.py` (English, Chinese, Spanish, German, in turn; phrasings
that share no word with the signal detectors) at step boundaries spread over
the run, never inside a tool group. Each method then fits the session, with
its system prompt, into each budget (a value <= 1 is a share of the session's
full payload, a larger one an absolute token count) with the exact o200k
counter. Rows are reported separately for agent traces and dialogues, over the
sessions whose full payload exceeds the budget (`sessions`; at an absolute
budget the smaller sessions fit whole and say nothing):

- instructions kept: share of the planted instructions whose text reaches the
  payload, not counting one that became the session's latest user message
  (mandatory in every strategy, so it would flatter the figure);
- users kept: share of all user messages sent (whole or cut);
- tool-group violations: payloads with a tool result without its call or a
  call without its results (the API rejects them);
- latest user: share of payloads holding the session's latest user message;
- over budget: share of payloads above the budget (a system prompt alone can be);
- utilisation: input tokens / budget, mean over the payloads within budget;
- p50 ms: median in-process time of one assembly (LangChain: one trim).

The baseline is `trim_messages(strategy="last", include_system=True,
start_on="human")` with the same counter, given `budget - 3` tokens because it
does not count the reply priming we count; `langchain (no start_on)` is the
same trim without the human-first rule.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/context_quality.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages, trim_messages

from app.context import AssemblyRequest, assemble, available_strategies
from app.core.conversation import LoggedMessage
from app.core.tokens import get_counter
from bench.common import DATASET, load_average, machine_info, markdown_table, percentile
from tests.support.planted import Instruction
from tests.support.planted import plant as plant_instructions

COUNTER = get_counter(None)
PRIMING = COUNTER.count_messages([])
DEFAULT_BUDGETS = (2000.0, 4000.0, 8000.0, 0.1, 0.25, 0.5)


@dataclass
class Case:
    id: str
    kind: str  # agent | dialogue
    system: str | None
    messages: list[dict[str, Any]]
    planted: dict[int, Instruction]  # index of the planted message -> its instruction
    users: set[int]  # indexes of every user message, planted ones included
    latest_user: int
    counts: list[int] = field(default_factory=list)

    def full_tokens(self) -> int:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return sum(self.counts) + COUNTER.count_messages(system)

    @property
    def mid_run(self) -> dict[int, Instruction]:
        """The planted instructions that are not the latest user message."""
        return {i: ins for i, ins in self.planted.items() if i != self.latest_user}


def plant(session: dict[str, Any], k: int = 4, offset: int = 0) -> Case:
    msgs, planted = plant_instructions(session["messages"], k, offset=offset)
    users = {i for i, m in enumerate(msgs) if m["role"] == "user"}
    case = Case(
        session["id"],
        session["meta"]["kind"],
        session.get("system"),
        msgs,
        {p.index: p.instruction for p in planted},
        users,
        max(users),
    )
    case.counts = [COUNTER.count_message(m) for m in msgs]
    return case


def load_cases(path: Path = DATASET, k: int = 4) -> list[Case]:
    with path.open(encoding="utf-8") as fh:
        sessions = [json.loads(line) for line in fh if line.strip()]
    return [plant(s, k, offset=n) for n, s in enumerate(sessions)]


@dataclass
class Outcome:
    kept: set[int]  # indexes into Case.messages
    payload: list[dict[str, Any]]
    input_tokens: int
    seconds: float


def run_ours(case: Case, budget: int, strategy: str, preview_limit: int = 1024) -> Outcome:
    history = [
        LoggedMessage(seq=i + 1, id=str(i), role=m["role"], body=m, token_count=c)
        for i, (m, c) in enumerate(zip(case.messages, case.counts, strict=True))
    ]
    request = AssemblyRequest(
        history=history,
        counter=COUNTER,
        budget=budget,
        session_id="bench",
        system=case.system,
        preview_limit_tokens=preview_limit,
        strategy=strategy,
    )
    start = time.perf_counter()
    result = assemble(request)
    seconds = time.perf_counter() - start
    kept = {s - 1 for s in result.kept_seqs}
    return Outcome(kept, list(result.messages), result.usage.input_tokens, seconds)


def langchain_messages(case: Case) -> tuple[list[BaseMessage], dict[str, int]]:
    msgs = convert_to_messages(case.messages)
    for i, m in enumerate(msgs):
        m.id = str(i)
    counts = {str(i): c for i, c in enumerate(case.counts)}
    if case.system:
        system = SystemMessage(case.system, id="system")
        counts["system"] = COUNTER.count_message({"role": "system", "content": case.system})
        msgs = [system, *msgs]
    return msgs, counts


def run_langchain(case: Case, budget: int, start_on: str | None) -> Outcome:
    msgs, counts = langchain_messages(case)

    def counter(batch: list[BaseMessage]) -> int:
        return sum(counts[str(m.id)] for m in batch)

    start = time.perf_counter()
    kept_msgs = trim_messages(
        msgs,
        max_tokens=budget - PRIMING,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on=start_on,
    )
    seconds = time.perf_counter() - start
    kept = {int(str(m.id)) for m in kept_msgs if m.id != "system"}
    payload = [case.messages[i] for i in sorted(kept)]
    tokens = counter(kept_msgs) + PRIMING
    return Outcome(kept, payload, tokens, seconds)


def violations(payload: Sequence[dict[str, Any]]) -> int:
    bad = 0
    waiting: set[str] = set()
    for m in payload:
        if m["role"] == "tool":
            if m.get("tool_call_id") not in waiting:
                bad += 1
            waiting.discard(str(m.get("tool_call_id")))
            continue
        bad += bool(waiting)
        waiting = {str(c["id"]) for c in m.get("tool_calls") or ()}
    return bad + bool(waiting)


def instructions_kept(case: Case, out: Outcome) -> int:
    return sum(ins.visible_in(out.payload) for ins in case.mid_run.values())


def parse_budgets(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def resolve(budget: float, case: Case) -> int:
    return int(case.full_tokens() * budget) if budget <= 1 else int(budget)


def label(budget: float) -> str:
    return f"{budget:g}x" if budget <= 1 else f"{int(budget):,} tok"


def methods(preview_limit: int) -> dict[str, Callable[[Case, int], Outcome]]:
    out: dict[str, Callable[[Case, int], Outcome]] = {
        name: functools.partial(run_ours, strategy=name, preview_limit=preview_limit)
        for name in available_strategies()
    }
    out["langchain trim_messages"] = functools.partial(run_langchain, start_on="human")
    out["langchain (no start_on)"] = functools.partial(run_langchain, start_on=None)
    return out


def row(name: str, kind: str, budget: float, cases: list[Case], method: Any) -> list[object]:
    bad = users = users_all = planted = planted_all = latest = over = n = 0
    util: list[float] = []
    times: list[float] = []
    for case in cases:
        b = resolve(budget, case)
        if case.kind != kind or case.full_tokens() <= b:
            continue
        n += 1
        out = method(case, b)
        bad += violations(out.payload) > 0
        users += len(out.kept & case.users)
        users_all += len(case.users)
        planted += instructions_kept(case, out)
        planted_all += len(case.mid_run)
        latest += case.latest_user in out.kept
        over += out.input_tokens > b
        if out.input_tokens <= b:
            util.append(out.input_tokens / b)
        times.append(out.seconds * 1000)

    def pct(a: int, b: int) -> str:
        return f"{100 * a / b:.1f}%" if b else "–"

    return [kind, label(budget), name, n, f"{pct(planted, planted_all)} ({planted}/{planted_all})",
            pct(users, users_all), bad, pct(latest, n), pct(over, n),
            f"{100 * sum(util) / len(util):.1f}%" if util else "–",
            f"{percentile(times, 50):.2f}" if times else "–"]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--budgets", type=parse_budgets, default=list(DEFAULT_BUDGETS))
    parser.add_argument("--k", type=int, default=4, help="instructions planted per session")
    parser.add_argument("--preview-limit", type=int, default=1024)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    args = parser.parse_args(argv)

    cases = load_cases(args.dataset, args.k)
    rows = []
    empty = []
    for kind in ("agent", "dialogue"):
        for budget in args.budgets:
            block = [
                row(name, kind, budget, cases, m) for name, m in methods(args.preview_limit).items()
            ]
            if block[0][3]:
                rows += block
            else:
                empty.append(f"{kind} at {label(budget)}")
    headers = ["data", "budget", "method", "sessions", "instructions kept", "users kept",
               "tool-group violations", "latest user", "over budget", "utilisation",
               "p50 ms"]  # fmt: skip
    kinds = {k: sum(c.kind == k for c in cases) for k in ("agent", "dialogue")}
    planted = sum(len(c.planted) for c in cases)
    print(f"{len(cases)} sessions ({kinds['agent']} agent traces, {kinds['dialogue']} "
          f"dialogues), {planted} instructions planted (en/zh/es/de, no detector word); "
          f"preview limit {args.preview_limit} tokens; o200k_base exact; {machine_info()}; "
          f"load {load_average()}\n")  # fmt: skip
    print(markdown_table(headers, rows))
    if empty:
        print(f"\nNo session exceeds the budget (nothing to choose): {', '.join(empty)}.")


if __name__ == "__main__":
    main()
