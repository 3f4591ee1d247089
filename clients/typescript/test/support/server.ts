/** The contextd server of this run (scripts/test.mjs starts it) and fresh session ids. */
import { randomUUID } from "node:crypto";
import { ContextdClient, Retry } from "../../src/index.js";

export function contextdUrl(): string {
  const url = process.env.CONTEXTD_TEST_URL;
  if (!url) throw new Error("CONTEXTD_TEST_URL is not set: run the tests with `npm test`");
  return url;
}

export function sessionId(prefix = "ts"): string {
  return `${prefix}-${randomUUID()}`;
}

/** A client with short retry waits, so the tests that make retries happen stay fast. */
export function client(baseUrl = contextdUrl()): ContextdClient {
  return new ContextdClient({ baseUrl, retry: new Retry({ backoff: 0.01, maxBackoff: 0.05 }) });
}
