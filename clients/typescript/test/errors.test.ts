import assert from "node:assert/strict";
import { test } from "node:test";
import {
  APIError,
  Conflict,
  IdempotencyConflict,
  LockHeld,
  NotFound,
  Retry,
  ServiceUnavailable,
  ValidationFailed,
  errorFromResponse,
  parseRetryAfter,
} from "../src/index.js";

const headers = (h: Record<string, string> = {}) => new Headers(h);

test("errors are classed by problem code, on the status the code belongs to", () => {
  const held = errorFromResponse(409, headers(), JSON.stringify({ code: "lock_held", detail: "held", holder: "w-1" }));
  assert.ok(held instanceof LockHeld && held instanceof Conflict);
  assert.equal(held.holder, "w-1");
  assert.equal(held.message, "409 lock_held: held");
  const replay = errorFromResponse(409, headers(), JSON.stringify({ code: "idempotency_conflict", seq: 7 }));
  assert.ok(replay instanceof IdempotencyConflict);
  assert.equal(replay.seq, 7);
  // A code on a status it never comes with (a proxy reusing names) is not trusted.
  const odd = errorFromResponse(404, headers(), JSON.stringify({ code: "lock_held" }));
  assert.ok(odd instanceof NotFound && !(odd instanceof LockHeld));
  const invalid = errorFromResponse(
    422,
    headers(),
    JSON.stringify({ code: "validation_error", errors: [{ loc: "messages[3].tool_call_id", msg: "required" }, "junk"] }),
  );
  assert.ok(invalid instanceof ValidationFailed);
  assert.deepEqual(invalid.errors, [{ loc: "messages[3].tool_call_id", msg: "required" }]);
  assert.deepEqual(invalid.fields, ["messages[3].tool_call_id"]);
});

test("a body that is not problem+json still gives the status's class, its text as detail", () => {
  const html = errorFromResponse(503, headers({ "retry-after": "3" }), "<html>bad gateway</html>");
  assert.ok(html instanceof ServiceUnavailable);
  assert.equal(html.code, "http_error");
  assert.equal(html.detail, "<html>bad gateway</html>");
  assert.equal(html.retryAfter, 3);
  const teapot = errorFromResponse(500, headers(), "");
  assert.ok(teapot instanceof APIError && teapot.constructor === APIError);
});

test("Retry-After in seconds or as an HTTP date; the retry rules by status and idempotency", () => {
  assert.equal(parseRetryAfter("2"), 2);
  assert.equal(parseRetryAfter(null), undefined);
  assert.equal(parseRetryAfter("soon"), undefined);
  const later = parseRetryAfter(new Date(Date.now() + 10_000).toUTCString())!;
  assert.ok(later > 8 && later <= 10, String(later));
  assert.equal(parseRetryAfter(new Date(Date.now() - 10_000).toUTCString()), 0);

  const retry = new Retry({ maxRetries: 2, backoff: 1, maxRetryAfter: 5 });
  assert.equal(retry.afterResponse(0, 503, headers({ "retry-after": "4" }), false), 4);
  assert.equal(retry.afterResponse(0, 429, headers({ "retry-after": "9" }), true), undefined, "longer than maxRetryAfter");
  assert.equal(retry.afterResponse(2, 503, headers({ "retry-after": "1" }), true), undefined, "out of retries");
  assert.equal(retry.afterResponse(0, 502, headers(), false), undefined, "a gateway error: only when safe twice");
  const backoff = retry.afterResponse(1, 504, headers(), true)!;
  assert.ok(backoff >= 1 && backoff <= 2, String(backoff));
  assert.equal(retry.afterResponse(0, 500, headers(), true), undefined);
  assert.equal(retry.afterError(0, false), undefined);
  assert.ok(retry.afterError(0, true)! > 0);
  assert.equal(new Retry({ maxRetries: 0 }).afterError(0, true), undefined);
});
