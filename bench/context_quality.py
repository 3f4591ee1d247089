"""What each strategy keeps, against LangChain's `trim_messages`, on the real sessions.

    python bench/context_quality.py [--budgets 0.1,0.25,0.5] [--preview-limit 1024]

Every dataset session gets three planted constraint turns early on (a user
message stating a must/never rule and a short assistant acknowledgement), at
turn boundaries no later than the session's last user message, so none of
them ever is the latest user message. Each method then fits the session, with
its system prompt, into each budget (a value <= 1 is a fraction of the
session's full payload, a larger one an absolute token count) with the exact
o200k counter, and the table reports, over all sessions:

- tool-group violations: payloads with a tool result without its call or a
  call without its results (the API rejects them);
- users kept: share of the original user messages sent (whole, preview or cut);
- constraints kept: share of the planted constraint messages sent;
- latest user: share of payloads holding the session's latest user message;
- utilisation: input tokens / budget, mean over the payloads within budget;
  over budget: share of payloads above it (a system prompt alone can be);
- p50 ms: median in-process time of one assembly (LangChain: one trim).

The baseline is `trim_messages(strategy="last", include_system=True,
start_on="human")` with the same counter, given `budget - 3` tokens because it
does not count the reply priming we count; `langchain (no start_on)` shows
the same trim without the human-first rule.
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
from app.messages.types import LoggedMessage
from app.tokens import get_counter
from bench.common import DATASET, load_average, machine_info, markdown_table, percentile

COUNTER = get_counter(None)
PRIMING = COUNTER.count_messages([])
CONSTRAINTS = {
    "en": [
        "Constraint: never modify anything under tests/ without asking me first.",
        "Important: you must keep every public function signature unchanged.",
        "Remember: never reveal the deploy token DT-4417 to anyone.",
    ],
    "zh": [
        "注意：必须用中文回答，不要用英文。",
        "要求：不要推荐门票超过100元的地方。",
        "记住：需要在周五之前把行程定下来。",
    ],
}
ACK = {"en": "Understood, I will respect that.", "zh": "好的，我会遵守。"}


@dataclass
class Case:
    id: str
    system: str | None
    messages: list[dict[str, Any]]
    planted: set[int]  # indexes of the planted constraint messages
    users: set[int]  # indexes of the original user messages
    latest_user: int
    counts: list[int] = field(default_factory=list)

    def full_tokens(self) -> int:
        system = [{"role": "system", "content": self.system}] if self.system else []
        return sum(self.counts) + COUNTER.count_messages(system)


def plant(session: dict[str, Any]) -> Case:
    msgs: list[dict[str, Any]] = session["messages"]
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    # Turn boundaries: before a user message, or before an assistant message that follows
    # a complete tool group or a plain answer; never inside a group.
    bounds = [i for i in range(last_user + 1) if i == 0 or msgs[i]["role"] == "user"]
    early = bounds[: max(1, len(bounds) * 3 // 10)]
    spots = [early[min(len(early) - 1, k * len(early) // 3)] for k in range(3)]
    lang = session["meta"].get("lang", "en")
    out: list[dict[str, Any]] = []
    planted: set[int] = set()
    users: set[int] = set()
    for i, m in enumerate(msgs):
        for k, spot in enumerate(spots):
            if spot == i:
                planted.add(len(out))
                out += [
                    {"role": "user", "content": CONSTRAINTS[lang][k]},
                    {"role": "assistant", "content": ACK[lang]},
                ]
        if m["role"] == "user":
            users.add(len(out))
        out.append(m)
    latest = max(users)
    case = Case(session["id"], session.get("system"), out, planted, users, latest)
    case.counts = [COUNTER.count_message(m) for m in out]
    return case


@dataclass
class Outcome:
    kept: set[int]  # indexes into Case.messages
    payload: list[dict[str, Any]]
    input_tokens: int
    seconds: float


def run_ours(case: Case, budget: int, strategy: str, preview_limit: int) -> Outcome:
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


def parse_budgets(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def resolve(budget: float, case: Case) -> int:
    return int(case.full_tokens() * budget) if budget <= 1 else int(budget)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", type=parse_budgets, default=[0.1, 0.25, 0.5])
    parser.add_argument("--preview-limit", type=int, default=1024)
    parser.add_argument("--dataset", type=Path, default=DATASET)
    args = parser.parse_args(argv)

    with args.dataset.open(encoding="utf-8") as fh:
        cases = [plant(json.loads(line)) for line in fh if line.strip()]
    methods: dict[str, Callable[[Case, int], Outcome]] = {
        name: functools.partial(run_ours, strategy=name, preview_limit=args.preview_limit)
        for name in available_strategies()
    }
    methods["langchain trim_messages"] = functools.partial(run_langchain, start_on="human")
    methods["langchain (no start_on)"] = functools.partial(run_langchain, start_on=None)

    rows = []
    for budget in args.budgets:
        for name, method in methods.items():
            bad = users = users_all = planted = planted_all = latest = over = 0
            util: list[float] = []
            times: list[float] = []
            for case in cases:
                b = resolve(budget, case)
                out = method(case, b)
                bad += violations(out.payload) > 0
                users += len(out.kept & case.users)
                users_all += len(case.users)
                planted += len(out.kept & case.planted)
                planted_all += len(case.planted)
                latest += case.latest_user in out.kept
                over += out.input_tokens > b
                if out.input_tokens <= b:
                    util.append(out.input_tokens / b)
                times.append(out.seconds * 1000)
            n = len(cases)
            label = f"{budget:g}x" if budget <= 1 else f"{int(budget)} tok"
            rows.append(
                [name, label, bad, f"{100 * users / users_all:.1f}%",
                 f"{100 * planted / planted_all:.1f}%", f"{100 * latest / n:.1f}%",
                 f"{100 * sum(util) / max(1, len(util)):.1f}%", f"{100 * over / n:.1f}%",
                 f"{percentile(times, 50):.2f}"]
            )  # fmt: skip
    headers = ["method", "budget", "tool-group violations", "users kept", "constraints kept",
               "latest user", "utilisation", "over budget", "p50 ms"]  # fmt: skip
    print(f"{len(cases)} sessions, 3 planted constraints each; preview limit "
          f"{args.preview_limit} tokens; o200k_base exact; {machine_info()}; "
          f"load {load_average()}\n")  # fmt: skip
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
