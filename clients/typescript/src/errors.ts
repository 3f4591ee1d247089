/**
 * The errors a contextd call throws, one class per problem `code` the server sends.
 *
 *     ContextdError                 anything that went wrong talking to contextd
 *     ├── TransportError            no HTTP answer (connection refused, reset, timeout)
 *     └── APIError                  an HTTP answer that is an error (problem+json)
 *         ├── ValidationFailed      422 validation_error: `.fields` names each faulty field
 *         ├── NotFound              404 not_found
 *         ├── Unauthorized          401 unauthorized
 *         ├── PayloadTooLarge       413 payload_too_large
 *         ├── ServiceUnavailable    503 unavailable, 429: retried first, thrown when retries run out
 *         └── Conflict              409, any code
 *             ├── LockHeld          lock_held: another owner holds the lease (`.holder`)
 *             ├── LockRequired      lock_required: a lease is live and the write had no token
 *             ├── StaleLockToken    stale_lock_token: the write's token is not the live one
 *             └── IdempotencyConflict  idempotency_conflict: a message id was stored with
 *                                   other content (`.seq` is where)
 *
 * Every APIError carries the parsed problem (`.problem`), its `.status`, `.code` and
 * `.detail`, and the response headers. A status with no class of its own (500, 405, ...)
 * throws `APIError` itself. The same tree as the Python client's.
 */

/** The problem+json body of an error answer, as far as it parsed. */
export type Problem = {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  errors?: { loc?: unknown; msg?: unknown }[] | null;
  [key: string]: unknown;
};

export class ContextdError extends Error {
  override name = "ContextdError";
}

/** The request got no HTTP answer, after every retry it was allowed; `cause` is the fetch error. */
export class TransportError extends ContextdError {
  override name = "TransportError";
}

export class APIError extends ContextdError {
  override name = "APIError";
  readonly status: number;
  readonly code: string;
  readonly detail: string;

  constructor(
    status: number,
    readonly problem: Problem,
    readonly headers: Headers,
    text = "",
  ) {
    const code = String(problem.code || "http_error");
    const detail = String(problem.detail || problem.title || text);
    super(`${status} ${code}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

/** One faulty field of a rejected request: `loc` like `messages[3].tool_call_id`. */
export type FieldError = { loc: string; msg: string };

export class ValidationFailed extends APIError {
  override name = "ValidationFailed";
  get errors(): FieldError[] {
    const raw = this.problem.errors;
    return (Array.isArray(raw) ? raw : [])
      .filter((e) => e !== null && typeof e === "object")
      .map((e) => ({ loc: String(e.loc ?? ""), msg: String(e.msg ?? "") }));
  }
  /** The location of each faulty field, in the server's order. */
  get fields(): string[] {
    return this.errors.map((e) => e.loc);
  }
}

export class NotFound extends APIError {
  override name = "NotFound";
}

export class Unauthorized extends APIError {
  override name = "Unauthorized";
}

export class PayloadTooLarge extends APIError {
  override name = "PayloadTooLarge";
}

/** 503 (or 429): the server wrote nothing and asked to be tried again later. */
export class ServiceUnavailable extends APIError {
  override name = "ServiceUnavailable";
  get retryAfter(): number | undefined {
    return parseRetryAfter(this.headers.get("retry-after"));
  }
}

export class Conflict extends APIError {
  override name = "Conflict";
}

export class LockHeld extends Conflict {
  override name = "LockHeld";
  get holder(): string | undefined {
    const holder = this.problem.holder;
    return holder === undefined || holder === null ? undefined : String(holder);
  }
}

export class LockRequired extends Conflict {
  override name = "LockRequired";
}

export class StaleLockToken extends Conflict {
  override name = "StaleLockToken";
}

export class IdempotencyConflict extends Conflict {
  override name = "IdempotencyConflict";
  get seq(): number | undefined {
    return typeof this.problem.seq === "number" ? this.problem.seq : undefined;
  }
}

type ErrorClass = new (status: number, problem: Problem, headers: Headers, text?: string) => APIError;

// code -> (class, the statuses it may come with): a code on an unexpected status (a
// proxy reusing names) is not trusted, and the status decides.
const BY_CODE: Record<string, [ErrorClass, number[]]> = {
  validation_error: [ValidationFailed, [422]],
  not_found: [NotFound, [404]],
  unauthorized: [Unauthorized, [401]],
  payload_too_large: [PayloadTooLarge, [413]],
  unavailable: [ServiceUnavailable, [503]],
  lock_held: [LockHeld, [409]],
  lock_required: [LockRequired, [409]],
  stale_lock_token: [StaleLockToken, [409]],
  idempotency_conflict: [IdempotencyConflict, [409]],
};
const BY_STATUS: Record<number, ErrorClass> = {
  401: Unauthorized,
  404: NotFound,
  409: Conflict,
  413: PayloadTooLarge,
  422: ValidationFailed,
  429: ServiceUnavailable,
  503: ServiceUnavailable,
};

/**
 * The error for an error answer: by problem `code`, else by status. A body that is
 * not problem+json (a proxy's HTML page) still gives an error of the status's class,
 * with the text as `detail`.
 */
export function errorFromResponse(status: number, headers: Headers, text: string): APIError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const problem: Problem = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Problem) : {};
  const byCode = BY_CODE[String(problem.code)];
  let cls: ErrorClass = byCode && byCode[1].includes(status) ? byCode[0] : (BY_STATUS[status] ?? APIError);
  return new cls(status, problem, headers, text);
}

/** Seconds from a `Retry-After` header: a number of seconds or an HTTP date. */
export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.max(0, Number(trimmed));
  const when = Date.parse(trimmed);
  if (Number.isNaN(when)) return undefined;
  return Math.max(0, (when - Date.now()) / 1000);
}
