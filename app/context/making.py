"""One assembly of a stream's payload: the call's selection parameters (its stream), the
window of the log its layout needs, and the engine run over it (app/context/service.py
decides which layout and which state of the session)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from app.context import (
    HISTORY_READ_FACTOR,
    AssemblyRequest,
    SummaryBlock,
    assemble,
    recall,
    stability,
)
from app.context import repository as repo
from app.context.caches import Caches
from app.context.params import ContextParams
from app.context.strategies import Strategy
from app.context.strategies.base import NoSelection
from app.context.trim_state import Layout, params_key
from app.context.types import DEFAULT_STRATEGY, AssembledContext, TokenCounter
from app.context.validation import validate_strategy
from app.core.conversation import LoggedMessage
from app.core.settings import Settings
from app.core.tokens import calibration
from app.db.database import Driver
from app.db.models import SessionRow


class Made(NamedTuple):
    """An assembled payload and what it was made from (the row: the session, or the session
    as it was before an automatic compaction whose summary waits)."""

    row: SessionRow
    layout: Layout
    stable: stability.StableStrategy
    history: Sequence[LoggedMessage]
    result: AssembledContext


async def make(
    db: Driver,
    row: SessionRow,
    layout: Layout,
    inner: Strategy,
    call: Stream,
    counter: TokenCounter,
    params: ContextParams,
    settings: Settings,
    caches: Caches,
    recalls: bool,
    *,
    replay_only: bool = False,
) -> Made:
    """Read the window `layout` needs and assemble; `replay_only`: the layout as it is or
    `NoSelection`."""
    below = below_tokens(row, call) if inner.backfill else 0
    history, complete_from, missing = await read_history(
        db, row, layout, call.raw_budget, caches, below
    )
    if replay_only and missing is None:
        raise NoSelection("what the layout needs lies beyond the window")
    stable = stability.StableStrategy(
        inner,
        # None: too much of what the layout needs lies beyond the window, trim afresh.
        layout if missing is not None else None,
        row,
        call.raw_budget - call.raw_reserve,
        settings.trim_target_ratio,
        replay_only=replay_only,
    )
    summary = (
        SummaryBlock(row.summary_text, row.last_compaction_seq, row.summary_carries_pinned)
        if row.summary_text
        else None
    )
    result = assemble(
        AssemblyRequest(
            history=history,
            counter=counter,
            budget=call.raw_budget,
            session_id=row.id,
            system=params.system if params.system is not None else row.system_prompt,
            tools=tools_of(params, row, recalls),
            dynamic_context=params.dynamic_context,
            summary=summary,
            mode=params.mode,
            reserve_output_tokens=call.raw_reserve,
            preview_limit_tokens=call.preview_limit,
            strategy=stable,
            history_from_seq=row.last_compaction_seq + 1,
            history_complete_from=complete_from,
            caches=caches,
        )
    )
    return Made(row, layout, stable, history, result)


# A tool output may take up to this fraction of the input budget whole (1/16) before it is
# sent as a preview, and never less than CONTEXTD_TOOL_PREVIEW_TOKENS: at 32,000 tokens
# and below the setting decides; a 128,000-token payload holds a file view of 8,000 whole.
# A larger share at 32k moved the misses from large outputs to the steps they pushed out;
# at 128k the room is there (docs/agent-loop.md, "A preview limit that follows the budget").
OUTPUT_SHARE = 16


@dataclass(frozen=True, slots=True)
class Stream:
    """The call's selection parameters in the counter's own (uncalibrated) tokens, and
    the payload stream they name."""

    factor: float
    raw_budget: int
    raw_reserve: int
    strategy: str
    preview_limit: int
    key: str

    @classmethod
    def of(
        cls,
        row: SessionRow,
        params: ContextParams,
        settings: Settings,
        counter: TokenCounter,
        budget: int,
    ) -> Stream:
        # Estimated counts run calibrated: fit the uncalibrated payload to a scaled budget.
        factor = calibration.factor_of(row.token_calibration, counter.mode)
        raw_budget, raw_reserve = calibration.raw_budget(
            budget, params.reserve_output_tokens, factor
        )
        if recall.enabled(params.recall, row.recall):
            raw_reserve += recall.reserve(counter)  # room for the note, kept like output
        strategy_name = validate_strategy(params.strategy or row.strategy or DEFAULT_STRATEGY)
        preview_limit = params.preview_limit_tokens or max(
            settings.tool_preview_tokens, raw_budget // OUTPUT_SHARE
        )
        # The payload stream: the parameters that shape the history selection. Not the
        # format: every format renders the same selection, so they share one stream.
        key = params_key(
            strategy=strategy_name,
            budget=raw_budget,
            reserve=raw_reserve,
            mode=params.mode,
            preview=preview_limit,
            tokenizer=counter.name,
        )
        return cls(factor, raw_budget, raw_reserve, strategy_name, preview_limit, key)


def below_tokens(row: SessionRow, call: Stream) -> int:
    """How far below the watermark the window reads (app/context/backfill.py): what the
    budget leaves after the effective history, times the factor every window is read
    with (a unit's output may be sent as a preview, smaller than logged); the effective
    history and this together never exceed the read of a session without a summary."""
    if row.last_compaction_seq <= 0 or not row.summary_text:
        return 0
    effective = row.context_tokens - row.watermark_context_tokens
    return HISTORY_READ_FACTOR * max(0, call.raw_budget - call.raw_reserve - effective)


async def read_history(
    db: Driver,
    row: SessionRow,
    layout: Layout,
    raw_budget: int,
    caches: Caches,
    below_tokens: int = 0,
) -> tuple[Sequence[LoggedMessage], int | None, list[int] | None]:
    """The window of the log, plus what `layout` needs beyond it; the seq from which every
    row was read; and the seqs that were missing from the window (None: too many to
    fetch one by one)."""
    read = repo.LogRead(row, caches.windows)
    await read.window(db, HISTORY_READ_FACTOR * raw_budget, below_tokens)
    history = read.messages()
    missing = stability.missing_seqs(layout, row, history)
    if missing:
        await read.seqs(db, missing)
        history = read.messages()
    read.keep()
    return history, read.complete_from, missing


def tools_of(params: ContextParams, row: SessionRow, recalls: bool) -> list[dict[str, Any]]:
    tools = params.tools if params.tools is not None else row.tools
    return recall.with_tool(tools) if recalls else tools
