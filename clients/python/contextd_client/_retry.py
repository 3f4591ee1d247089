"""When a failed call is sent again, and after how long.

Two kinds of failure are retried:

- an answer that says nothing was written and asks to come back (503, 429),
  after its `Retry-After` or the backoff: for every call;
- no answer at all (connection refused or reset, timeout) and a gateway's
  502/504: the request may or may not have been applied, so only calls that are
  safe to apply twice are sent again. Reads are; so is an append, because the
  client gives every message an id once and a replayed id is stored once.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from contextd_client._exceptions import parse_retry_after

__all__ = ["Retry"]

ALWAYS_RETRIED = frozenset({429, 503})
IDEMPOTENT_RETRIED = frozenset({502, 504})


@dataclass(frozen=True)
class Retry:
    """Retry policy. `Retry(max_retries=0)` turns retries off.

    The n-th retry waits `backoff * 2**n` seconds (at most `max_backoff`), with
    jitter, or what `Retry-After` asks when the server says; a `Retry-After`
    longer than `max_retry_after` is not waited for and the error is raised.
    """

    max_retries: int = 3
    backoff: float = 0.25
    max_backoff: float = 8.0
    max_retry_after: float = 60.0

    def after_error(self, attempt: int, idempotent: bool) -> float | None:
        """The wait before retrying a request that got no answer, or None to give up."""
        if not idempotent or attempt >= self.max_retries:
            return None
        return self._backoff(attempt)

    def after_response(
        self, attempt: int, response: httpx.Response, idempotent: bool
    ) -> float | None:
        """The wait before retrying a request answered with an error, or None to give up."""
        status = response.status_code
        retryable = status in ALWAYS_RETRIED or (idempotent and status in IDEMPOTENT_RETRIED)
        if not retryable or attempt >= self.max_retries:
            return None
        asked = parse_retry_after(response.headers.get("retry-after"))
        if asked is None:
            return self._backoff(attempt)
        return asked if asked <= self.max_retry_after else None

    def _backoff(self, attempt: int) -> float:
        full = min(self.max_backoff, self.backoff * (2.0**attempt))
        return full * random.uniform(0.5, 1.0)  # jitter: clients that failed together spread
