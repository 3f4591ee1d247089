"""The `prefix_id` echo: each payload stream's last `prefix_id`, sent back on its next call.

contextd makes `usage.stable_prefix_tokens` exact when a context call carries the
`prefix_id` of the payload the caller sent before on the same stream
(`previous_prefix_id`); without it the server guesses that the previous call
lacked only the newest step, which is wrong when an agent appends several steps
between model calls. The clients remember it so callers and adapters get the
exact figure without plumbing ids around.

A stream, as the client keys it: the session and the parameters that shape a
payload's selection or its rendering (`STREAM_PARAMS`). Per-call `system`,
`tools` and `dynamic_context` are not part of it: the server compares them
against the echoed payload's head and counts nothing shared when they changed.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal


class Remembered(enum.Enum):
    """`previous_prefix_id=REMEMBERED` (the default): echo the stream's last `prefix_id`."""

    REMEMBERED = "remembered"


REMEMBERED = Remembered.REMEMBERED
# A string is sent as given; None sends none (the server's guess); REMEMBERED echoes.
PreviousPrefix = str | None | Literal[Remembered.REMEMBERED]

STREAM_PARAMS = (
    "max_tokens",
    "strategy",
    "mode",
    "format",
    "reserve_output_tokens",
    "preview_limit_tokens",
    "recall",
)
# Enough for every stream a long-lived process keeps calling; the oldest go first.
MAX_STREAMS = 4096

StreamKey = tuple[Any, ...]


class PrefixMemory:
    """The last `prefix_id` per stream. Thread-safe: a blocking client may be shared."""

    def __init__(self, enabled: bool = True, size: int = MAX_STREAMS) -> None:
        self.enabled = enabled
        self._size = size
        self._ids: OrderedDict[StreamKey, str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(session_id: str, parts: Mapping[str, Any]) -> StreamKey:
        # The server's defaults are the same stream as leaving a parameter out.
        fmt = parts.get("format") or "openai"
        reserve = parts.get("reserve_output_tokens") or 0
        rest = tuple(
            parts.get(p) for p in STREAM_PARAMS if p not in ("format", "reserve_output_tokens")
        )
        return (session_id, fmt, reserve, *rest)

    def resolve(self, key: StreamKey, given: PreviousPrefix) -> str | None:
        """What to send as `previous_prefix_id`."""
        if given is not REMEMBERED:
            return given
        if not self.enabled:
            return None
        with self._lock:
            return self._ids.get(key)

    def remember(self, key: StreamKey, prefix_id: str | None) -> None:
        if not self.enabled:
            return
        with self._lock:
            if prefix_id is None:
                self._ids.pop(key, None)
                return
            self._ids[key] = prefix_id
            self._ids.move_to_end(key)
            while len(self._ids) > self._size:
                self._ids.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """The session's log was rewritten or removed: its payloads are no one's prefix."""
        with self._lock:
            for key in [k for k in self._ids if k[0] == session_id]:
                del self._ids[key]
