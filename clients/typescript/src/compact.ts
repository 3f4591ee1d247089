/**
 * `compact({ wait: true })`: how long to wait for its answer, and what a lost answer
 * means (the Python client's rules, its `_compact.py`).
 *
 * The server holds a waiting compact's answer until the job ends, for `timeout_s` or,
 * without it, twice its `COMPACTION_COMPACT_TIMEOUT_S` plus 10 s (70 s by default):
 * the attempt waits that long, plus a margin, whatever the client's own `timeout`.
 *
 * A waiting compact whose answer is lost (a reset, a timeout, a gateway's 502/504) is
 * not simply sent again: if its job has finished meanwhile, a second request starts a
 * second job, which finds nothing left to do and answers `noop`, and the caller would
 * be told its compaction did nothing. So the client notes the session's finished jobs
 * before the first attempt, and after a lost answer reads the recent jobs again (GET
 * /sessions/{id}/compaction). A job that has finished since the call began is its
 * answer (the oldest such, if several did); otherwise the request is sent again: it
 * joins the job still running, or starts the one the lost attempt never did.
 */
import { APIError, type ContextdError, TransportError } from "./errors.js";
import { IDEMPOTENT_RETRIED } from "./retry.js";
import type { CompactionState, CompactResult } from "./types.js";

const ACTIVE = new Set(["pending", "running"]);
// The server's wait without `timeout_s` under its default settings (compact_timeout_s
// 30): it reads its own setting, which a client cannot see.
export const SERVER_DEFAULT_WAIT_S = 30 * 2 + 10;
const READ_MARGIN_S = 15;

/** Seconds to wait for a waiting compact's answer. */
export function readTimeout(timeoutS: number | null | undefined): number {
  return (timeoutS ?? SERVER_DEFAULT_WAIT_S) + READ_MARGIN_S;
}

export function finishedJobs(state: CompactionState): Set<string> {
  return new Set(state.jobs.filter((j) => !ACTIVE.has(j.status)).map((j) => j.job_id));
}

/** The job that finished since `before` was read (jobs come newest first), or undefined. */
export function jobFinishedSince(state: CompactionState, before: Set<string>): CompactResult | undefined {
  const done = state.jobs.filter((j) => !ACTIVE.has(j.status) && !before.has(j.job_id));
  return done[done.length - 1];
}

/** No answer, or a gateway's instead: the request may have been applied. */
export function answerLost(error: ContextdError): boolean {
  return error instanceof TransportError || (error instanceof APIError && IDEMPOTENT_RETRIED.has(error.status));
}
