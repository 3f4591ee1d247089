import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ContextdClient,
  Retry,
  ServiceUnavailable,
  type ChatMessage,
  type Decision,
  type SessionStats,
} from "../src/index.js";
import { withProxy, type Seen } from "./support/proxy.js";
import { client, sessionId } from "./support/server.js";

const compactions = (s: Seen) => s.method === "POST" && s.path.endsWith("/compact");
const jobReads = (s: Seen) => s.method === "GET" && s.path.endsWith("/compaction");
const readyz = (s: Seen) => s.path === "/readyz";

// Enough turns that a forced compaction has something to summarize (the preserved
// tail keeps the last few turns whole).
const history: ChatMessage[] = Array.from({ length: 14 }, (_, i): ChatMessage[] => [
  { role: "user", content: `question ${i}: what does line ${i} of notes.txt say? ${"context ".repeat(40)}` },
  { role: "assistant", content: `line ${i} says item ${i}. ${"detail ".repeat(40)}` },
]).flat();

describe("headers, readiness behind a gateway, waiting compactions, result types", () => {
  const ctx = client();

  test("one Authorization header, the explicit one winning over the API key, whatever its case", () =>
    withProxy(async (proxy) => {
      const baseUrl = proxy.baseUrl;
      await new ContextdClient({ baseUrl, apiKey: "k-arg", headers: { Authorization: "Bearer k-header" } }).health();
      await new ContextdClient({ baseUrl, apiKey: "k-arg", headers: { AUTHORIZATION: "Bearer k-header" } }).health();
      await new ContextdClient({ baseUrl, apiKey: "k-arg", headers: { authorization: "Bearer k-header" } }).health();
      await new ContextdClient({ baseUrl, apiKey: "k-arg", headers: { Accept: "application/json", "X-Tenant": "t2" } }).health();
      const sent = proxy.seen.map((s) => s.headers);
      assert.deepEqual(
        sent.map((h) => h.authorization),
        ["Bearer k-header", "Bearer k-header", "Bearer k-header", "Bearer k-arg"],
      );
      assert.equal(sent[3]!.accept, "application/json", "one Accept, not ours and theirs joined");
      assert.equal(sent[3]!["x-tenant"], "t2");
    }));

  test("ready() behind a gateway's 503 throws ServiceUnavailable; contextd's own not_ready is an answer", () =>
    withProxy(async (proxy) => {
      const c = client(proxy.baseUrl);
      const gateway = [
        "<html>503 Service Temporarily Unavailable</html>",
        JSON.stringify({ status: 503, code: "unavailable", detail: "gateway" }),
        JSON.stringify({ status: "draining" }),
      ];
      for (const body of gateway) {
        proxy.answerNext(1, readyz, 503, {}, body);
        await assert.rejects(c.ready(), ServiceUnavailable, body);
      }
      proxy.answerNext(1, readyz, 503, {}, JSON.stringify({ status: "not_ready", database: false, schema: false }));
      assert.deepEqual(await c.ready(), { status: "not_ready", database: false, schema: false });
      assert.equal((await c.ready()).status, "ready");
    }));

  test("a waiting compact reads its answer as long as the server may wait, past the client's timeout", () =>
    withProxy(async (proxy) => {
      // Only the waiting compact runs under the client's short timeout: every other
      // request of this client goes without one, so however slow a busy machine makes
      // them they cannot time out and be looked up again. The compact's answer is held
      // back longer than that timeout, whose timer always fires first: with the
      // client's timeout on that attempt, the test fails on any machine.
      const unhurried: typeof fetch = (input, init) =>
        init?.method === "POST" && String(input).endsWith("/compact")
          ? fetch(input, init)
          : fetch(input, { ...init, signal: null });
      const c = new ContextdClient({ baseUrl: proxy.baseUrl, timeout: 0.3, retry: new Retry({ backoff: 0.01 }), fetch: unhurried });
      for (const options of [{ timeout_s: 60 }, {}]) {
        const id = sessionId();
        await ctx.append(id, history);
        proxy.delayNext(1, compactions, 1000); // longer than the client's 0.3 s
        const job = await c.compact(id, { wait: true, force: true, ...options });
        assert.ok("job_id" in job && job.status === "success", JSON.stringify(job));
        const sent = proxy.seen.filter((s) => s.path.includes(id));
        assert.deepEqual(sent.filter(compactions).length, 1, "the answer was waited for, not asked again");
        assert.ok(sent.filter(jobReads).length <= 1, "no lost answer to look up");
      }
    }));

  test("a waiting compact whose answer was lost reports the job it started, not a second one's noop", () =>
    withProxy(async (proxy) => {
      const id = sessionId();
      await ctx.append(id, history);
      proxy.loseNext(1, compactions);
      const job = await client(proxy.baseUrl).compact(id, { wait: true, force: true });
      assert.equal(proxy.matching(compactions).length, 1, "not sent again: the job had finished");
      const jobs = (await ctx.compaction(id)).jobs;
      assert.deepEqual(jobs.map((j) => j.job_id), ["job_id" in job ? job.job_id : "?"]);
      assert.equal(job.status, "success");
    }));

  test("a waiting compact that a gateway refused before it reached contextd is sent again", () =>
    withProxy(async (proxy) => {
      const id = sessionId();
      await ctx.append(id, history);
      proxy.answerNext(1, compactions, 502, {}, "<html>bad gateway</html>");
      const job = await client(proxy.baseUrl).compact(id, { wait: true, force: true });
      assert.equal(proxy.matching(compactions).length, 2);
      assert.equal(job.status, "success");
      assert.equal((await ctx.compaction(id)).jobs.length, 1);
    }));

  test("the result types name what the server answers: decisions, token calibration", async () => {
    const id = sessionId();
    await ctx.putSession(id, { model: "gpt-4o-mini" });
    await ctx.append(id, history);
    const decisions: Decision[] = (await ctx.context(id)).decisions;
    assert.ok(decisions.length > 0);
    assert.ok(decisions.every((d) => typeof d.seq === "number" && typeof d.action === "string"));
    const stats: SessionStats = (await ctx.getSession(id)).stats;
    assert.equal(stats.last_seq, history.length);
    assert.ok("token_calibration" in stats);
  });
});
