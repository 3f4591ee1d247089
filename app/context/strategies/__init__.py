"""History-selection strategies, registered by name (built-ins and entry points)."""

from app.context.strategies import key_messages, sliding_window, summary
from app.context.strategies.base import (
    ENTRY_POINT_GROUP,
    Selection,
    Strategy,
    available_strategies,
    get_strategy,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Selection",
    "Strategy",
    "available_strategies",
    "get_strategy",
    "key_messages",
    "sliding_window",
    "summary",
]
