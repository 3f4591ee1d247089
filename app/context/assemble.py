"""The fixed assembly pipeline of SPEC §3.

Order in the payload, which is also the order of priority: system block
(never dropped) and mode banner · tool definitions (never truncated) · dynamic
context · compacted summary · history (chosen by the strategy).

Budget arithmetic: the system block, banner and tools are always sent.
Dynamic items and then the summary are included while they fit; the strategy
gets what is left. When even the mandatory history (pinned units, the latest
user message) does not fit there, it outranks the summary and then the
dynamic items (last first), which are given up, with a warning, to make room;
a strategy with `summary_required` keeps its summary, and so does every strategy
when the summary carries pinned messages (they are mandatory wherever they are
kept). If that is still not
enough, the payload is sent with `over_budget: true` and a warning saying
what did not fit.

Accounting is exact: `input_tokens == counter.count_messages(messages) +
counter.count_tools(tools)`; the reply priming the counter adds once per
request is reported apart, as `breakdown.reply_priming`.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.context import counts, decisions
from app.context.caches import Caches
from app.context.preview import sanitize
from app.context.request import AssemblyRequest
from app.context.strategies.base import (
    NoSelection,
    Selection,
    Strategy,
    get_strategy,
    hard_rule,
    is_builtin,
)
from app.context.types import (
    AssembledContext,
    Breakdown,
    DynamicItem,
    SummaryBlock,
    SummaryState,
    TokenCounter,
    Usage,
)
from app.context.validation import validate_strategy
from app.context.view import Form, HistoryView, Limits
from app.core.conversation import Group, LoggedMessage, SetAside, split_groups, summary_message

log = logging.getLogger(__name__)

FALLBACK_STRATEGY = "key_messages"


def mode_banner(mode: str) -> dict[str, Any]:
    return {"role": "system", "content": f"Active mode: {mode}"}


def _system_block(system: str | Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    if system is None or system == "":
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    return [sanitize(m) for m in system]


def _dynamic(item: str | Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "system", "content": item} if isinstance(item, str) else sanitize(item)


def _ordered(history: Sequence[LoggedMessage]) -> Sequence[LoggedMessage]:
    if all(a.seq < b.seq for a, b in itertools.pairwise(history)):
        return history
    by_seq = {m.seq: m for m in reversed(history)}  # the first copy of a seq wins
    return [by_seq[s] for s in sorted(by_seq)]


def _select(strategy: Strategy, view: HistoryView, budget: int, warnings: list[str]) -> Selection:
    try:
        sel = strategy.select(view, budget)
    except NoSelection:
        raise
    except Exception:
        if is_builtin(strategy):
            raise
        # A third-party strategy's bug must not cost the agent its payload.
        log.warning("strategy %s failed; using %s", strategy.name, FALLBACK_STRATEGY, exc_info=True)
        warnings.append(f"strategy {strategy.name} failed; {FALLBACK_STRATEGY} was used instead")
        sel = get_strategy(FALLBACK_STRATEGY).select(view, budget)
    for unit in view.hard():
        if unit.index not in sel.picks:
            warnings.append(f"strategy {strategy.name} left out seq {unit.first_seq}; it was added")
            sel.pick(unit, Form.FULL, hard_rule(unit))
    return sel


def assemble(request: AssemblyRequest) -> AssembledContext:
    strategy = (
        request.strategy
        if isinstance(request.strategy, Strategy)
        else get_strategy(validate_strategy(request.strategy))
    )
    counter: TokenCounter = request.counter
    limit = request.input_limit
    warnings: list[str] = []
    caches = request.caches if request.caches is not None else Caches()
    pre = _prelude(request, strategy, limit, caches.counts, warnings)
    summary = request.summary
    below = summary is not None and strategy.backfill
    history, summarized = _unsummarized(_ordered(request.history), summary, below=below)
    groups, aside = split_groups(history)
    anchor = next((m.seq for m in reversed(history) if m.role == "user"), None)
    if below and summary is not None and not _backfillable(groups, summary.through_seq, anchor):
        # Nothing to send but compacted units (the newest unit is mandatory, and a
        # compacted unit never is), or a group the watermark cuts (a compaction cuts
        # between steps): the summary alone then, as without them.
        below = False
        history, summarized = _unsummarized(_ordered(request.history), summary)
        groups, aside = split_groups(history)
    if below and summary is not None:
        # What the summary covers and cannot be sent is the summary's, whatever else
        # would have set it aside.
        aside = [
            SetAside(a.message, "excluded", "summarized")
            if a.message.seq <= summary.through_seq
            else a
            for a in aside
        ]
    limits = Limits.from_preview_limit(request.session_id, request.preview_limit_tokens)
    view = HistoryView.build(
        groups,
        limits,
        counter,
        caches,
        watermark=summary.through_seq if summary is not None and below else None,
        anchor=anchor,
        complete_from=request.history_complete_from,
    )
    _warn_set_aside(aside, warnings)
    if view.summary_tokens != pre.summary_cost:
        view = dataclasses.replace(view, summary_tokens=pre.summary_cost)

    sel = _select(strategy, view, pre.left, warnings)
    history_cost = sel.cost(view)
    if history_cost > pre.left:
        _make_room(pre, history_cost - pre.left, summary, strategy, warnings)
        sel = _select(strategy, view, pre.left, warnings)
        history_cost = sel.cost(view)

    messages = _messages(pre, view, sel)
    priming = counter.count_messages([])
    breakdown = Breakdown(
        system=pre.system_cost - priming,
        reply_priming=priming,
        tools=pre.tools_cost,
        dynamic=sum(c for _, _, c in pre.dynamic),
        summary=pre.summary_cost,
        history=history_cost,
    )
    over_budget = breakdown.total > limit
    if over_budget:
        warnings.append(_over_budget_warning(breakdown, limit, view))

    decided = decisions.per_seq(view, sel, [*summarized, *aside])
    from_seq = request.history_from_seq
    if from_seq is None and summary is not None:
        from_seq = summary.through_seq + 1
    runs, dropped = decisions.encode(decided, from_seq)
    return AssembledContext(
        messages=messages,
        tools=pre.tools,
        usage=Usage(
            breakdown.total,
            limit,
            counter.mode,
            breakdown,
            _recent_tokens(view, sel, request.history_complete_from),
        ),
        kept_seqs=decisions.kept_seqs(decided),
        dropped_count=dropped,
        summary=SummaryState(pre.summary_msg is not None, summary.through_seq if summary else None),
        strategy=strategy.name,
        over_budget=over_budget,
        warnings=tuple(warnings),
        decisions=tuple(runs),
    )


@dataclass(slots=True)
class _Prelude:
    """The messages before the history, their costs, and the tokens they leave the
    strategy (`left`). The system block, banner and tools are always sent; the dynamic
    items (index, message, cost) and the summary are the ones that may be given up."""

    head: list[dict[str, Any]]
    system_cost: int
    tools: tuple[dict[str, Any], ...]
    tools_cost: int
    left: int
    dynamic: list[tuple[int, dict[str, Any], int]] = field(default_factory=list)
    summary_msg: dict[str, Any] | None = None
    summary_cost: int = 0


def _prelude(
    request: AssemblyRequest,
    strategy: Strategy,
    limit: int,
    cache: counts.CountCache,
    warnings: list[str],
) -> _Prelude:
    """The system block, banner and tools, then the dynamic items and the summary while
    they fit."""
    counter = request.counter
    head = _system_block(request.system)
    if request.mode:
        head.append(mode_banner(request.mode))
    system_cost = counter.count_messages([]) + sum(
        counts.message_tokens(counter, m, cache) for m in head
    )
    tools = tuple(dict(t) for t in request.tools)
    tools_cost = counts.tools_tokens(counter, tools, cache)
    pre = _Prelude(head, system_cost, tools, tools_cost, limit - system_cost - tools_cost)
    _fit_dynamic(pre, request.dynamic_context, counter, cache, warnings)
    _fit_summary(pre, request.summary, strategy, counter, cache, warnings)
    return pre


def _fit_dynamic(
    pre: _Prelude,
    items: Sequence[DynamicItem],
    counter: TokenCounter,
    cache: counts.CountCache,
    warnings: list[str],
) -> None:
    left = pre.left
    for i, item in enumerate(items):
        msg = _dynamic(item)
        cost = counts.message_tokens(counter, msg, cache)
        if cost <= left:
            pre.dynamic.append((i, msg, cost))
            left -= cost
        else:
            warnings.append(f"dynamic_context[{i}] left out: its {cost} tokens do not fit")
    pre.left = left


def _fit_summary(
    pre: _Prelude,
    summary: SummaryBlock | None,
    strategy: Strategy,
    counter: TokenCounter,
    cache: counts.CountCache,
    warnings: list[str],
) -> None:
    if summary is not None:
        msg = summary_message(summary.text)
        cost = counts.message_tokens(counter, msg, cache)
        if cost <= pre.left or strategy.summary_required or summary.required:
            pre.summary_msg, pre.summary_cost = msg, cost
            pre.left -= cost
        else:
            warnings.append(
                f"summary (through seq {summary.through_seq}) left out: it does not fit"
            )
    elif strategy.summary_required:
        warnings.append("no compacted summary yet: the window covers the history alone")


def _backfillable(groups: Sequence[Group], through: int, anchor: int | None) -> bool:
    """Whether the newest group is not a compacted one (it is above the watermark, or the
    anchor), and no group has messages on both sides of the watermark."""
    if not groups:
        return False
    last = groups[-1].messages
    if last[-1].seq <= through and not (len(last) == 1 and last[0].seq == anchor):
        return False
    return not any(g.messages[0].seq <= through < g.messages[-1].seq for g in groups)


def _unsummarized(
    history: Sequence[LoggedMessage], summary: SummaryBlock | None, *, below: bool = False
) -> tuple[Sequence[LoggedMessage], list[SetAside]]:
    """The history the summary does not cover, and what it covers, set aside; with
    `below`, what it covers stays too (the view marks it compacted: app/context/backfill.py),
    as long as the history above the watermark is not empty."""
    if summary is None:
        return history, []
    # Pinned messages under the watermark are carried verbatim by the summary. The
    # turn anchor (the latest user message, SPEC §5) stays in the history even when
    # a compaction moved the watermark past it, inside the current turn.
    through = summary.through_seq
    anchor = next((m for m in reversed(history) if m.role == "user"), None)
    if below and (anchor is not None or (history and history[-1].seq > through)):
        return history, []
    summarized = [
        SetAside(m, "excluded", "summarized")
        for m in history
        if m.seq <= through and m is not anchor
    ]
    return [m for m in history if m.seq > through or m is anchor], summarized


def _make_room(
    pre: _Prelude,
    deficit: int,
    summary: SummaryBlock | None,
    strategy: Strategy,
    warnings: list[str],
) -> None:
    """Frees `deficit` tokens for the mandatory history the strategy could not fit."""
    # Mandatory history outranks the summary, then dynamic items (last first).
    required = strategy.summary_required or (summary is not None and summary.required)
    if pre.summary_msg is not None and not required and deficit > 0:
        warnings.append(
            f"summary (through seq {summary.through_seq if summary else 0}) "
            "left out to make room for the mandatory history"
        )
        pre.left += pre.summary_cost
        deficit -= pre.summary_cost
        pre.summary_msg, pre.summary_cost = None, 0
    dynamic = pre.dynamic
    while dynamic and deficit > 0:
        i, _, cost = dynamic.pop()
        warnings.append(f"dynamic_context[{i}] left out to make room for the mandatory history")
        pre.left += cost
        deficit -= cost


def _messages(pre: _Prelude, view: HistoryView, sel: Selection) -> tuple[dict[str, Any], ...]:
    messages = [*pre.head, *(m for _, m, _ in pre.dynamic)]
    if pre.summary_msg is not None:
        messages.append(pre.summary_msg)
    for unit in view.units:
        picked = sel.picks.get(unit.index)
        if picked is not None:
            messages.extend(unit.render(picked[0])[0])
    return tuple(messages)


def _recent_tokens(view: HistoryView, sel: Selection, complete_from: int | None) -> int:
    """The tokens of the newest contiguous run of units the payload holds, in their sent form.

    The run also ends where the units read skip seqs the read did not reach (below
    `complete_from`): a replayed layout reads only the old units it keeps, and the ones
    it left out between them are not in the view at all.
    """
    total = 0
    newer: int | None = None  # the first seq of the unit after this one
    for unit in reversed(view.units):
        picked = sel.picks.get(unit.index)
        if picked is None:
            break
        after = unit.messages[-1].seq + 1
        if newer is not None and complete_from is not None and after < min(newer, complete_from):
            break
        total += unit.cost(picked[0])
        newer = unit.first_seq
    return total


def _warn_set_aside(aside: Sequence[SetAside], warnings: list[str]) -> None:
    in_flight = sorted({s.message.seq for s in aside if s.rule == "in_flight"})
    if in_flight:
        warnings.append(
            f"seqs {in_flight[0]}–{in_flight[-1]}: tool calls without all their results yet "
            "are left out (the API rejects a call without its result)"
        )
    lost = [s.message.seq for s in aside if s.message.pinned and s.action != "excluded"]
    if lost:
        warnings.append(f"pinned seqs {lost} cannot be sent: their tool group is incomplete")


def _over_budget_warning(b: Breakdown, limit: int, view: HistoryView) -> str:
    hard = [u.first_seq for u in view.hard()]
    return (
        f"over budget: {b.total} tokens for a budget of {limit}; system block {b.system}, "
        f"tools {b.tools}, dynamic {b.dynamic}, summary {b.summary} and the mandatory history "
        f"{b.history} (pinned and latest user message, seqs {hard}) do not fit even compacted"
    )
