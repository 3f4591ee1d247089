/**
 * `ContextdClient`: the whole contextd API over `fetch`. Every method is one call,
 * answered with the schema's type; options use the API's own (snake_case) names.
 *
 *     const ctx = new ContextdClient({ baseUrl: "http://127.0.0.1:8080" });
 *     await ctx.putSession("demo", { model: "gpt-4o-mini", system_prompt: "Be brief." });
 *     await ctx.append("demo", [{ role: "user", content: "hi" }]);
 *     const payload = await ctx.context("demo"); // payload.messages go to the model
 */
import { answerLost, finishedJobs, jobFinishedSince, readTimeout } from "./compact.js";
import { ContextdError, TransportError, errorFromResponse, Conflict, NotFound } from "./errors.js";
import type { paths } from "./generated/openapi.js";
import {
  type Answer,
  type Call,
  type Method,
  type Op,
  attemptSignal,
  defaultHeaders,
  parsed,
  renderPath,
  renderQuery,
  stoppedAfter,
} from "./http.js";
import { type HeldLease, Renewal, warnReleaseFailed } from "./lease.js";
import { PrefixMemory, type PreviousPrefix } from "./prefix.js";
import { Retry, type RetryOptions } from "./retry.js";
import type * as T from "./types.js";

export const DEFAULT_URL = "http://127.0.0.1:8080";
const TAIL_PAGE = 100; // the server's default page size; a longer tail takes several pages
// A prefix_id grows with the payload's head; a long one goes in a body, not a URL.
const MAX_QUERY_PREFIX_ID = 2048;
const QUERY_PARAMS = new Set(["max_tokens", "strategy", "mode", "format", "reserve_output_tokens", "preview_limit_tokens", "recall"]);

export type ClientOptions = {
  /** Defaults to `$CONTEXTD_URL`, then http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Defaults to `$CONTEXTD_API_KEY`; sent as `Authorization: Bearer`, unless `headers` has an `Authorization`. */
  apiKey?: string;
  /** Seconds per attempt. */
  timeout?: number;
  retry?: Retry | RetryOptions;
  /** Sent with every request; names are case-insensitive, and an `Authorization` here wins over `apiKey`. */
  headers?: Record<string, string>;
  /** Send each payload stream's last `prefix_id` back on its next context call (default true). */
  echoPrefixIds?: boolean;
  /** Another fetch (a proxy, a test double); defaults to the global one. */
  fetch?: typeof fetch;
};

/** A message with an `id`: what `withIds` returns and `append` sends. */
export type Identified<M> = M & { id: string };

/** A fresh message id; contextd stores a message once per id. */
export function newMessageId(): string {
  return crypto.randomUUID().replace(/-/g, "");
}

/**
 * Copies of `messages`, each with an `id` (kept if it has one, else a new one). Ids are
 * assigned here, once, before the first attempt: every retry of the same append
 * carries the same ids, so the server stores each message once.
 */
export function withIds<M extends { id?: string | null }>(messages: readonly M[]): Identified<M>[] {
  return messages.map((m) => ({ ...m, id: m.id || newMessageId() }));
}

type Sleep = (seconds: number) => Promise<void>;
const sleep: Sleep = (s) => new Promise((resolve) => setTimeout(resolve, s * 1000));

function env(name: string): string | undefined {
  return typeof process !== "undefined" ? process.env[name] : undefined;
}

export class ContextdClient {
  readonly baseUrl: string;
  readonly retry: Retry;
  readonly prefixIds: PrefixMemory;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;
  /** Replaceable in tests. */
  sleep: Sleep = sleep;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? env("CONTEXTD_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
    this.retry = options.retry instanceof Retry ? options.retry : new Retry(options.retry);
    this.prefixIds = new PrefixMemory(options.echoPrefixIds ?? true);
    this.timeoutMs = (options.timeout ?? 30) * 1000;
    this.fetchImpl = options.fetch ?? globalThis.fetch;
    this.headers = defaultHeaders(options.apiKey ?? env("CONTEXTD_API_KEY"), options.headers);
  }

  /**
   * Send one call with the retry rules of retry.ts; the answer's status comes along
   * (an append's 201 or 200 says whether anything new was stored). `stop` aborted
   * ends the attempt in flight and the retries (a `TransportError`).
   */
  async request<P extends keyof paths, M extends Method>(
    call: Call<P, M>,
    stop?: AbortSignal,
  ): Promise<{ status: number; data: Answer<Op<P, M>> }> {
    const url =
      this.baseUrl +
      renderPath(call.path, call.params as Record<string, unknown>) +
      renderQuery(call.query as Record<string, unknown>);
    const hasBody = call.body !== undefined;
    const init: RequestInit = {
      method: call.method.toUpperCase(),
      headers: hasBody ? { ...this.headers, "content-type": "application/json" } : this.headers,
      body: hasBody ? JSON.stringify(call.body) : undefined,
    };
    const retried = call.retried ?? true;
    const idempotent = call.idempotent ?? false;
    const timeoutMs = Math.max(this.timeoutMs, (call.readTimeout ?? 0) * 1000);
    const wait = async (delay: number) => (stop ? stoppedAfter(delay, stop) : this.sleep(delay).then(() => false));
    for (let attempt = 0; ; attempt++) {
      let status: number;
      let headers: Headers;
      let text: string;
      const signal = attemptSignal(timeoutMs, stop);
      try {
        const response = await this.fetchImpl(url, { ...init, signal: signal.signal });
        status = response.status;
        headers = response.headers;
        text = await response.text();
      } catch (error) {
        signal.done();
        const delay = retried && !stop?.aborted ? this.retry.afterError(attempt, idempotent) : undefined;
        if (delay === undefined || (await wait(delay))) {
          throw new TransportError(`${init.method} ${call.path}: ${describe(error)}`, { cause: error });
        }
        continue;
      }
      signal.done();
      if (status >= 200 && status < 300) {
        const data = (text ? JSON.parse(text) : undefined) as Answer<Op<P, M>>;
        return { status, data };
      }
      if (call.answers) {
        const body = parsed(text);
        if (call.answers(status, body)) return { status, data: body as Answer<Op<P, M>> };
      }
      const delay = retried ? this.retry.afterResponse(attempt, status, headers, idempotent) : undefined;
      if (delay === undefined || (await wait(delay))) throw errorFromResponse(status, headers, text);
    }
  }

  private async send<P extends keyof paths, M extends Method>(call: Call<P, M>, stop?: AbortSignal): Promise<Answer<Op<P, M>>> {
    return (await this.request(call, stop)).data;
  }

  // sessions

  /** Create or update a session; fields left out keep their stored value, null resets one. */
  putSession(sessionId: string, settings: T.SessionSettings, lockToken?: string): Promise<T.Session> {
    const body = lockToken === undefined ? settings : { ...settings, lock_token: lockToken };
    return this.send({ method: "put", path: "/sessions/{session_id}", params: { session_id: sessionId }, body, idempotent: true });
  }

  getSession(sessionId: string): Promise<T.Session> {
    return this.send({ method: "get", path: "/sessions/{session_id}", params: { session_id: sessionId }, idempotent: true });
  }

  listSessions(query: { limit?: number; cursor?: string } = {}): Promise<T.SessionPage> {
    return this.send({ method: "get", path: "/sessions", query, idempotent: true });
  }

  /** Delete the session, its log and its settings (see `clear` to keep the settings). */
  async deleteSession(sessionId: string, options: { lockToken?: string } = {}): Promise<void> {
    const body = options.lockToken ? { lock_token: options.lockToken } : undefined;
    await this.send({ method: "delete", path: "/sessions/{session_id}", params: { session_id: sessionId }, body });
    this.prefixIds.forget(sessionId);
  }

  // messages

  /**
   * Append messages atomically. Each gets an `id` (unless it has one) before the first
   * attempt, so a retried append is stored once; `created` is false when every message
   * was already stored.
   */
  async append(
    sessionId: string,
    messages: readonly T.ChatMessage[],
    options: { lockToken?: string } = {},
  ): Promise<T.AppendResult> {
    const body = { messages: withIds(messages), lock_token: options.lockToken ?? null };
    const { status, data } = await this.request({
      method: "post",
      path: "/sessions/{session_id}/messages",
      params: { session_id: sessionId },
      body,
      idempotent: true,
    });
    return { ...data, created: status === 201 };
  }

  /**
   * One page of the raw log; `order: "desc"` reads from the tail (`before_seq`).
   *
   * A range: `from_seq`..`to_seq` (inclusive), or `seqs` as a summary item cites them
   * (`"412-431"`, `"3,7-9"`; `next_seqs` is what a page did not reach). `max_chars`
   * holds the page's text to that many characters: long messages are cut to a share,
   * their `range` saying which characters they keep.
   */
  messages(
    sessionId: string,
    query: {
      order?: "asc" | "desc";
      after_seq?: number;
      before_seq?: number;
      limit?: number;
      from_seq?: number;
      to_seq?: number;
      seqs?: string;
      max_chars?: number;
    } = {},
  ): Promise<T.MessagePage> {
    return this.send({
      method: "get",
      path: "/sessions/{session_id}/messages",
      params: { session_id: sessionId },
      query: { ...query, order: query.order === "desc" ? "desc" : undefined },
      idempotent: true,
    });
  }

  /** Every message of the log, oldest first, page by page. */
  async allMessages(sessionId: string): Promise<T.Message[]> {
    const out: T.Message[] = [];
    let after = 0;
    for (;;) {
      const page = await this.messages(sessionId, { after_seq: after, limit: TAIL_PAGE });
      out.push(...page.messages);
      if (page.next_after_seq === null || page.messages.length === 0) return out;
      after = page.next_after_seq;
    }
  }

  /** The last `limit` messages of the log, oldest first. */
  async tail(sessionId: string, limit: number): Promise<T.Message[]> {
    const out: T.Message[] = [];
    let before: number | undefined;
    while (out.length < limit) {
      const want = Math.min(TAIL_PAGE, limit - out.length);
      const page = await this.messages(sessionId, { order: "desc", before_seq: before, limit: want });
      out.push(...page.messages);
      if (page.next_before_seq === null || page.messages.length === 0) break;
      before = page.next_before_seq;
    }
    return out.reverse();
  }

  /** One message in full, or a character or line range of its text. */
  message(
    sessionId: string,
    seq: number,
    range: { char_start?: number; char_end?: number; line_start?: number; line_end?: number } = {},
  ): Promise<T.MessageOut> {
    return this.send({
      method: "get",
      path: "/sessions/{session_id}/messages/{seq}",
      params: { session_id: sessionId, seq },
      query: range,
      idempotent: true,
    });
  }

  /** Remove the messages with `seq >= fromSeq` (above the watermark only). */
  deleteTail(sessionId: string, fromSeq: number, options: { lockToken?: string } = {}): Promise<T.TailDeleteResult> {
    // Not retried without an answer: between two attempts another writer may have
    // appended above fromSeq, and the second attempt would delete that too.
    const body = options.lockToken ? { lock_token: options.lockToken } : undefined;
    return this.send({
      method: "delete",
      path: "/sessions/{session_id}/messages",
      params: { session_id: sessionId },
      query: { from_seq: fromSeq },
      body,
    });
  }

  /** Empty the log, summary and watermark; the settings stay. */
  async clear(sessionId: string, options: { lockToken?: string } = {}): Promise<T.ClearResult> {
    const body = { lock_token: options.lockToken ?? null };
    const result = await this.send({ method: "post", path: "/sessions/{session_id}/clear", params: { session_id: sessionId }, body });
    this.prefixIds.forget(sessionId);
    return result;
  }

  // context, budget

  /**
   * The payload for the next model call. Per-call `system`, `tools` or
   * `dynamic_context` make it a POST; otherwise the session's stored ones apply.
   *
   * `previousPrefixId` defaults to the `prefix_id` this client got last for the same
   * session and parameters, which makes `usage.stable_prefix_tokens` exact; pass a
   * string to send that one, or null to send none.
   */
  async context(
    sessionId: string,
    options: T.ContextOptions = {},
    previousPrefixId: PreviousPrefix = undefined,
  ): Promise<T.Context> {
    const given = Object.fromEntries(
      Object.entries(options).filter(([, v]) => v !== undefined && v !== null),
    ) as T.ContextOptions;
    const stream = PrefixMemory.key(sessionId, given);
    const echo = this.prefixIds.resolve(stream, previousPrefixId);
    const params = { session_id: sessionId };
    const path = "/sessions/{session_id}/context" as const;
    const queryOnly = Object.keys(given).every((k) => QUERY_PARAMS.has(k));
    let payload: T.Context;
    if (queryOnly && (echo ?? "").length <= MAX_QUERY_PREFIX_ID) {
      const query = { ...(given as Record<string, unknown>), previous_prefix_id: echo ?? undefined };
      payload = await this.send({ method: "get", path, params, query, idempotent: true });
    } else {
      const body = { ...given, previous_prefix_id: echo ?? null };
      payload = await this.send({ method: "post", path, params, body, idempotent: true });
    }
    this.prefixIds.remember(stream, payload.prefix_id ?? null);
    return payload;
  }

  budget(sessionId: string): Promise<T.Budget> {
    return this.send({ method: "get", path: "/sessions/{session_id}/budget", params: { session_id: sessionId }, idempotent: true });
  }

  /** The budget after appending `messages`, and whether they fit; writes nothing. */
  previewBudget(sessionId: string, messages: readonly T.ChatMessage[]): Promise<T.BudgetPreview> {
    return this.send({
      method: "post",
      path: "/sessions/{session_id}/budget",
      params: { session_id: sessionId },
      body: { messages: [...messages] },
      idempotent: true,
    });
  }

  /** Report the provider's own input-token count for the last payload (calibration). */
  reportUsage(sessionId: string, usage: T.UsageInput, options: { lockToken?: string } = {}): Promise<T.UsageReport> {
    return this.send({
      method: "post",
      path: "/sessions/{session_id}/usage",
      params: { session_id: sessionId },
      body: { ...usage, lock_token: options.lockToken ?? null },
    });
  }

  // compaction, events

  /**
   * Request a compaction: `{job_id, status}`, or with `wait` the finished job (still
   * active if the wait ran out). A waiting call waits for its answer as long as the
   * server may, and a lost answer is looked up, not sent twice (compact.ts).
   */
  async compact(sessionId: string, options: T.CompactOptions = {}, lockToken?: string): Promise<T.CompactResult> {
    const call = {
      method: "post",
      path: "/sessions/{session_id}/compact",
      params: { session_id: sessionId },
      body: { ...options, lock_token: lockToken ?? null },
    } as const;
    if (!options.wait || options.dry_run) {
      // A retried request joins the running job or starts a harmless noop: safe twice.
      return this.send({ ...call, idempotent: true });
    }
    // Sent again only below, after looking for its job: a plain second request could
    // answer another job's outcome (a noop) as this one's.
    const waiting = { ...call, readTimeout: readTimeout(options.timeout_s) };
    const before = finishedJobs(await this.compaction(sessionId));
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.send(waiting);
      } catch (error) {
        const delay = error instanceof ContextdError && answerLost(error) ? this.retry.afterError(attempt, true) : undefined;
        if (delay === undefined) throw error;
        await this.sleep(delay);
      }
      const done = jobFinishedSince(await this.compaction(sessionId), before);
      if (done !== undefined) return done;
    }
  }

  compaction(sessionId: string): Promise<T.CompactionState> {
    return this.send({ method: "get", path: "/sessions/{session_id}/compaction", params: { session_id: sessionId }, idempotent: true });
  }

  /**
   * Undo the session's latest stored compaction (`jobId`, e.g. the state's
   * `revertable_job_id`): the summary and watermark it replaced come back, the log is
   * untouched. Any other job is a `Conflict` (`not_latest_compaction`,
   * `not_revertable`, `already_reverted`). Not sent twice without an answer: the
   * second attempt would answer `already_reverted` for the first one's work.
   */
  revertCompaction(sessionId: string, jobId: string, lockToken?: string): Promise<T.RevertResult> {
    return this.send({
      method: "post",
      path: "/sessions/{session_id}/compaction/{job_id}/revert",
      params: { session_id: sessionId, job_id: jobId },
      body: { lock_token: lockToken ?? null },
    });
  }

  /**
   * Recall: full-text search over the whole log, compacted and trimmed messages included.
   * `search(id, "words", { limit })` as the Python client's `search(id, q, limit=...)`,
   * or `search(id, { q: "words", limit })`.
   */
  search(sessionId: string, query: string | T.SearchQuery, options: Omit<T.SearchQuery, "q"> = {}): Promise<T.SearchResult> {
    const q: T.SearchQuery = typeof query === "string" ? { ...options, q: query } : { ...options, ...query };
    return this.send({ method: "get", path: "/sessions/{session_id}/search", params: { session_id: sessionId }, query: q, idempotent: true });
  }

  events(sessionId: string, query: { after_id?: number; limit?: number; type?: string } = {}): Promise<T.EventPage> {
    return this.send({ method: "get", path: "/sessions/{session_id}/events", params: { session_id: sessionId }, query, idempotent: true });
  }

  // leases

  /** Claim the writer lease; `LockHeld` (409) while another owner holds it. */
  claimLease(sessionId: string, owner: string, ttlS = 30): Promise<T.Lease> {
    // Not idempotent: a second claim meets the first one's lease (409 lock_held).
    return this.send({ method: "post", path: "/sessions/{session_id}/lock", params: { session_id: sessionId }, body: { owner, ttl_s: ttlS } });
  }

  renewLease(sessionId: string, lockToken: string, ttlS = 30): Promise<T.Lease> {
    return this.send({
      method: "post",
      path: "/sessions/{session_id}/lock/renew",
      params: { session_id: sessionId },
      body: { lock_token: lockToken, ttl_s: ttlS },
      idempotent: true,
    });
  }

  /**
   * Release the lease. Retried without an answer: a retry whose first attempt was
   * applied answers `StaleLockToken`, which then means released.
   */
  async releaseLease(sessionId: string, lockToken: string): Promise<void> {
    await this.send({
      method: "delete",
      path: "/sessions/{session_id}/lock",
      params: { session_id: sessionId },
      body: { lock_token: lockToken },
      idempotent: true, // a second release changes nothing: 409 stale_lock_token (404 if the session is gone)
    });
  }

  /**
   * Hold the session's writer lease while `work` runs: claimed first (`LockHeld` if
   * another owner has it), renewed at a third of its life, released at the end.
   * `work` gets the lease; pass `lease.lock_token` to every write. Leaving ends a
   * renewal in flight. A release that fails goes to `onReleaseError` (default: a
   * `console.warn`) and is not thrown: `work`'s own error, or its result, stands, and
   * the lease expires by its TTL.
   */
  async withLease<R>(
    sessionId: string,
    owner: string,
    work: (lease: HeldLease) => Promise<R>,
    options: { ttlS?: number; renewEvery?: number; onReleaseError?: (error: ContextdError) => void } = {},
  ): Promise<R> {
    const ttlS = options.ttlS ?? 30;
    const held: HeldLease = await this.claimLease(sessionId, owner, ttlS);
    const renew = (stop: AbortSignal) =>
      this.send(
        {
          method: "post",
          path: "/sessions/{session_id}/lock/renew",
          params: { session_id: sessionId },
          body: { lock_token: held.lock_token, ttl_s: ttlS },
          idempotent: true,
        },
        stop,
      );
    const renewal = new Renewal(held, renew, options.renewEvery ?? Math.max(ttlS / 3, 0.05));
    try {
      return await work(held);
    } finally {
      renewal.end();
      try {
        await this.releaseLease(sessionId, held.lock_token);
      } catch (error) {
        // Someone else's lease, or none left: there is nothing of ours to release.
        if (!(error instanceof ContextdError)) throw error;
        if (!(error instanceof Conflict || error instanceof NotFound)) {
          (options.onReleaseError ?? ((e) => warnReleaseFailed(sessionId, held, e)))(error);
        }
      }
    }
  }

  // tokens, operations

  countTokens(input: T.TokenCountInput): Promise<T.TokenCount> {
    return this.send({ method: "post", path: "/tokens/count", body: input, idempotent: true });
  }

  health(): Promise<Record<string, string>> {
    return this.send({ method: "get", path: "/healthz", idempotent: true });
  }

  /**
   * `status` is "ready" or "not_ready" (database away, schema behind): both are
   * answers. A 503 that is not contextd's (a gateway's) throws `ServiceUnavailable`.
   */
  async ready(): Promise<{ status: string; [key: string]: unknown }> {
    const notReady = (status: number, body: unknown) =>
      status === 503 && body !== null && typeof body === "object" && (body as { status?: unknown }).status === "not_ready";
    const answer = await this.send({ method: "get", path: "/readyz", idempotent: true, answers: notReady, retried: false });
    return answer as { status: string };
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as { cause?: unknown }).cause;
    return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
  }
  return String(error);
}
