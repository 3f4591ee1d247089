import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { APIError, ContextdClient, Retry, StaleLockToken, type ContextdError } from "../src/index.js";
import { withProxy, type Seen } from "./support/proxy.js";
import { client, sessionId } from "./support/server.js";

const releases = (s: Seen) => s.method === "DELETE" && s.path.endsWith("/lock");
const renewals = (s: Seen) => s.path.endsWith("/lock/renew");
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("withLease when the release or a renewal fails", () => {
  const ctx = client();

  test("a release whose answer is lost is sent again, and its stale token means released", () =>
    withProxy(async (proxy) => {
      const id = sessionId();
      await ctx.append(id, [{ role: "user", content: "hi" }]);
      const warned: ContextdError[] = [];
      proxy.loseNext(1, releases);
      const out = await client(proxy.baseUrl).withLease(id, "w", async () => "done", {
        onReleaseError: (e) => void warned.push(e),
      });
      assert.equal(out, "done");
      assert.equal(proxy.matching(releases).length, 2, "the release was retried");
      assert.deepEqual(warned, [], "the retry's 409 stale_lock_token says the lease is released");
      await ctx.releaseLease(id, (await ctx.claimLease(id, "next")).lock_token); // free
      // A second release of the same token is refused as stale: nothing changes.
      const lease = await ctx.claimLease(id, "again");
      await ctx.releaseLease(id, lease.lock_token);
      await assert.rejects(ctx.releaseLease(id, lease.lock_token), StaleLockToken);
    }));

  test("a failed release neither masks the work's error nor fails work that succeeded", () =>
    withProxy(async (proxy) => {
      const c = client(proxy.baseUrl);
      const warned: ContextdError[] = [];
      const onReleaseError = (e: ContextdError) => void warned.push(e);
      const problem = JSON.stringify({ status: 500, code: "internal", detail: "boom" });
      proxy.answerNext(9, releases, 500, {}, problem);

      const own = new Error("the work's own error");
      const first = sessionId();
      await ctx.append(first, [{ role: "user", content: "hi" }]);
      const failed = await c
        .withLease(first, "w", async () => Promise.reject(own), { ttlS: 1, onReleaseError })
        .catch((e: unknown) => e);
      assert.equal(failed, own);

      const second = sessionId();
      await ctx.append(second, [{ role: "user", content: "hi" }]);
      assert.equal(await c.withLease(second, "w", async () => 42, { ttlS: 1, onReleaseError }), 42);
      assert.equal(warned.length, 2);
      assert.ok(warned.every((e) => e instanceof APIError && e.status === 500));
      assert.equal(proxy.matching(releases).length, 2, "a 500 is not sent again");

      // Without onReleaseError: a console warning naming the session.
      const third = sessionId();
      await ctx.append(third, [{ role: "user", content: "hi" }]);
      const printed: unknown[][] = [];
      const warn = console.warn;
      console.warn = (...args: unknown[]) => void printed.push(args);
      try {
        assert.equal(await c.withLease(third, "w", async () => "ok", { ttlS: 1 }), "ok");
      } finally {
        console.warn = warn;
      }
      assert.equal(printed.length, 1);
      assert.match(String(printed[0]![0]), new RegExp(`lease on session "${third}" \\(APIError: 500 internal: boom\\); it expires by its TTL`));
    }));

  test("leaving ends a renewal stuck in its retries, and its late refusal is not a loss", () =>
    withProxy(async (proxy) => {
      const id = sessionId();
      await ctx.append(id, [{ role: "user", content: "hi" }]);
      // Every renewal's answer is lost: each is retried 3 times, 0.15 to 0.3 s apart.
      proxy.loseNext(1000, renewals);
      const slow = new ContextdClient({ baseUrl: proxy.baseUrl, retry: new Retry({ maxRetries: 3, backoff: 0.3, maxBackoff: 0.3 }) });
      let lease: { lost?: ContextdError } | undefined;
      await slow.withLease(
        id,
        "w",
        async (held) => {
          lease = held;
          while (proxy.matching(renewals).length === 0) await pause(10);
        },
        { ttlS: 30, renewEvery: 0.05 },
      );
      const atLeaving = proxy.matching(renewals).length;
      await pause(1200); // the retries of the renewal in flight would have run by now
      assert.equal(proxy.matching(renewals).length, atLeaving, "no renewal was sent after leaving");
      assert.equal(lease?.lost, undefined);
      assert.equal(proxy.matching(releases).length, 1);
    }));
});
