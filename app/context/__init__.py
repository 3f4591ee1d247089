"""Context assembly (SPEC §3): the pure engine behind `GET/POST /sessions/{id}/context`.

    from app.context import AssemblyRequest, assemble, validate_context_params

    validate_context_params(strategy=..., max_tokens=..., tools=..., ...)  # 422s
    result = assemble(AssemblyRequest(history=..., counter=..., budget=..., ...))
    body = result.to_dict()  # plus usage.status from app.core.budget

What the repository hands over as `history` (seq order, duplicates allowed):
the messages with seq > watermark, read newest first until their cumulative
`token_count` reaches `HISTORY_READ_FACTOR` x the budget and extended back to
the start of that turn, plus the 64 user messages before them (a user's short
instruction outranks any tool output, however old), every pinned message with
seq > watermark and the rest of its tool group. Pass `history_from_seq = watermark + 1` so the
seqs not read are reported as dropped by budget. For a strategy with `backfill`
(`key_messages`) the window also goes on below the watermark when the effective
history is short, up to twice what the budget leaves after it; pass
`history_complete_from` (the window's first seq) so only that contiguous run is
offered (app/context/backfill.py). Cost is linear in what is handed over; nothing
older than the window is ever needed.
"""

from app.context.assemble import assemble, mode_banner
from app.context.request import AssemblyRequest
from app.context.strategies import Strategy, available_strategies, get_strategy
from app.context.types import (
    AssembledContext,
    Breakdown,
    Decision,
    SummaryBlock,
    SummaryState,
    TokenCounter,
    Usage,
)
from app.context.validation import validate_context_params, validate_strategy

# Reading twice the budget gives key_messages older units to choose from;
# sliding_window and summary never look past one budget's worth.
HISTORY_READ_FACTOR = 2

__all__ = [
    "HISTORY_READ_FACTOR",
    "AssembledContext",
    "AssemblyRequest",
    "Breakdown",
    "Decision",
    "Strategy",
    "SummaryBlock",
    "SummaryState",
    "TokenCounter",
    "Usage",
    "assemble",
    "available_strategies",
    "get_strategy",
    "mode_banner",
    "validate_context_params",
    "validate_strategy",
]
