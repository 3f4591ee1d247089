"""`compact(wait=True)`: how long to read its answer, and what a lost answer means.

The server holds a waiting compact's answer until the job ends, for `timeout_s` or,
without it, twice its `COMPACTION_COMPACT_TIMEOUT_S` plus 10 s (70 s by default):
the request's read timeout covers that, plus a margin, whatever the client's own.

A waiting compact whose answer is lost (a reset, a read timeout, a gateway's 502/504)
is not simply sent again: if its job has finished meanwhile, a second request starts
a second job, which finds nothing left to do and answers `noop`, and the caller would
be told its compaction did nothing. So the client notes the session's finished jobs
before the first attempt, and after a lost answer reads the recent jobs again (GET
/sessions/{id}/compaction). A job that has finished since the call began is its
answer (the oldest such, if several did); otherwise the request is sent again: it
joins the job still running, or starts the one the lost attempt never did.
"""

from __future__ import annotations

from contextd_client._exceptions import APIError, ContextdError, TransportError
from contextd_client._models import CompactionState, CompactResult
from contextd_client._retry import IDEMPOTENT_RETRIED

__all__ = ["answer_lost", "finished_jobs", "job_finished_since", "read_timeout"]

ACTIVE = frozenset({"pending", "running"})
# The server's wait without `timeout_s` under its default settings (compact_timeout_s
# 30): it reads its own setting, which a client cannot see.
SERVER_DEFAULT_WAIT_S = 30.0 * 2 + 10
READ_MARGIN_S = 15.0


def read_timeout(timeout_s: float | None) -> float:
    return (timeout_s if timeout_s is not None else SERVER_DEFAULT_WAIT_S) + READ_MARGIN_S


def finished_jobs(state: CompactionState) -> frozenset[str]:
    return frozenset(str(j.get("job_id")) for j in state.jobs if j.get("status") not in ACTIVE)


def job_finished_since(state: CompactionState, before: frozenset[str]) -> CompactResult | None:
    """The job that finished since `before` was read (jobs come newest first), or None."""
    done = [
        j
        for j in state.jobs
        if j.get("status") not in ACTIVE and str(j.get("job_id")) not in before
    ]
    return CompactResult.model_validate(done[-1]) if done else None


def answer_lost(exc: ContextdError) -> bool:
    """No answer, or a gateway's instead: the request may have been applied."""
    return isinstance(exc, TransportError) or (
        isinstance(exc, APIError) and exc.status in IDEMPOTENT_RETRIED
    )
