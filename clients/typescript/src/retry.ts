/**
 * When a failed call is sent again, and after how long (the Python client's rules).
 *
 * Two kinds of failure are retried:
 *
 * - an answer that says nothing was written and asks to come back (503, 429), after
 *   its `Retry-After` or the backoff: for every call;
 * - no answer at all (connection refused or reset, timeout) and a gateway's 502/504:
 *   the request may or may not have been applied, so only calls that are safe to
 *   apply twice are sent again. Reads are; so is an append, because the client gives
 *   every message an id once and a replayed id is stored once.
 */
import { parseRetryAfter } from "./errors.js";

const ALWAYS_RETRIED = new Set([429, 503]);
/** A gateway's answer that says nothing of what the server did with the request. */
export const IDEMPOTENT_RETRIED = new Set([502, 504]);

export type RetryOptions = {
  /** Retries after the first attempt; 0 turns retries off. */
  maxRetries?: number;
  /** Seconds before the first retry; the n-th waits `backoff * 2**n`, with jitter. */
  backoff?: number;
  maxBackoff?: number;
  /** A `Retry-After` longer than this is not waited for: the error is thrown. */
  maxRetryAfter?: number;
};

export class Retry {
  readonly maxRetries: number;
  readonly backoff: number;
  readonly maxBackoff: number;
  readonly maxRetryAfter: number;

  constructor(options: RetryOptions = {}) {
    this.maxRetries = options.maxRetries ?? 3;
    this.backoff = options.backoff ?? 0.25;
    this.maxBackoff = options.maxBackoff ?? 8;
    this.maxRetryAfter = options.maxRetryAfter ?? 60;
  }

  /** Seconds to wait before retrying a request that got no answer, or undefined to give up. */
  afterError(attempt: number, idempotent: boolean): number | undefined {
    if (!idempotent || attempt >= this.maxRetries) return undefined;
    return this.backoffFor(attempt);
  }

  /** Seconds to wait before retrying a request answered with an error, or undefined to give up. */
  afterResponse(attempt: number, status: number, headers: Headers, idempotent: boolean): number | undefined {
    const retryable = ALWAYS_RETRIED.has(status) || (idempotent && IDEMPOTENT_RETRIED.has(status));
    if (!retryable || attempt >= this.maxRetries) return undefined;
    const asked = parseRetryAfter(headers.get("retry-after"));
    if (asked === undefined) return this.backoffFor(attempt);
    return asked <= this.maxRetryAfter ? asked : undefined;
  }

  private backoffFor(attempt: number): number {
    const full = Math.min(this.maxBackoff, this.backoff * 2 ** attempt);
    return full * (0.5 + Math.random() * 0.5); // jitter: clients that failed together spread
  }
}
