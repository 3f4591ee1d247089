import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ContextdClient,
  LockHeld,
  LockRequired,
  NotFound,
  Retry,
  ServiceUnavailable,
  StaleLockToken,
  TransportError,
  ValidationFailed,
  type ChatMessage,
} from "../src/index.js";
import { LossyProxy, type Seen } from "./support/proxy.js";
import { client, contextdUrl, sessionId } from "./support/server.js";

const appends = (s: Seen) => s.method === "POST" && s.path.endsWith("/messages");

const toolStep: ChatMessage[] = [
  { role: "user", content: "read notes.txt" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "read_file", arguments: '{"path":"notes.txt"}' } }],
  },
  { role: "tool", tool_call_id: "call_1", content: "first line\nsecond line" },
  { role: "assistant", content: "It says: first line" },
];

describe("the client against a real contextd", () => {
  const ctx = client();

  test("sessions: put creates then updates, get, list, delete", async () => {
    const id = sessionId();
    const created = await ctx.putSession(id, { model: "gpt-4o-mini", system_prompt: "Be brief.", anchors: ["keep me"] });
    assert.equal(created.id, id);
    assert.equal(created.system_prompt, "Be brief.");
    const updated = await ctx.putSession(id, { context_limit: 8000 });
    assert.equal(updated.context_limit, 8000);
    assert.equal(updated.system_prompt, "Be brief."); // left out: kept
    assert.deepEqual((await ctx.getSession(id)).anchors, ["keep me"]);
    const page = await ctx.listSessions({ limit: 500 });
    assert.ok(Array.isArray(page.sessions));
    await ctx.deleteSession(id);
    await assert.rejects(ctx.getSession(id), NotFound);
  });

  test("append gives seqs in order; the same ids again are a replay stored once", async () => {
    const id = sessionId();
    const first = await ctx.append(id, toolStep);
    assert.equal(first.created, true);
    assert.deepEqual(first.messages.map((m) => m.seq), [1, 2, 3, 4]);
    const ids = first.messages.map((m) => m.id);
    const again = await ctx.append(id, toolStep.map((m, i) => ({ ...m, id: ids[i] })));
    assert.equal(again.created, false);
    assert.deepEqual(again.messages.map((m) => m.seq), [1, 2, 3, 4]);
    const log = await ctx.allMessages(id);
    assert.deepEqual(log.map((m) => m.seq), [1, 2, 3, 4]);
    assert.deepEqual(log.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  });

  test("an append whose answer is lost is retried with the same ids and stored once", async () => {
    const proxy = await new LossyProxy(contextdUrl()).start();
    try {
      const ctx2 = client(proxy.baseUrl);
      const id = sessionId();
      proxy.loseNext(1, appends);
      const result = await ctx2.append(id, toolStep);
      const sent = proxy.matching(appends);
      assert.equal(sent.length, 2, "the append was sent twice");
      assert.equal(sent[0]!.body, sent[1]!.body, "with the same ids, byte for byte");
      assert.equal(result.created, false, "the retry found every message stored");
      const log = await ctx.allMessages(id);
      assert.equal(log.length, toolStep.length);
      assert.deepEqual(log.map((m) => m.id), result.messages.map((m) => m.id));
    } finally {
      await proxy.stop();
    }
  });

  test("503 and 429 are retried after Retry-After; a tail delete without an answer is not", async () => {
    const proxy = await new LossyProxy(contextdUrl()).start();
    try {
      const ctx2 = client(proxy.baseUrl);
      const waits: number[] = [];
      ctx2.sleep = async (s) => void waits.push(s);
      const id = sessionId();
      proxy.answerNext(2, appends, 503, { "retry-after": "2" }, JSON.stringify({ status: 503, code: "unavailable", detail: "busy" }));
      await ctx2.append(id, toolStep.slice(0, 1));
      assert.deepEqual(waits, [2, 2]);
      assert.equal((await ctx.allMessages(id)).length, 1);

      proxy.answerNext(9, appends, 429, { "retry-after": "0" });
      const none = new ContextdClient({ baseUrl: proxy.baseUrl, retry: new Retry({ maxRetries: 1 }) });
      const error = await none.append(id, toolStep.slice(1, 2)).catch((e: unknown) => e);
      assert.ok(error instanceof ServiceUnavailable);
      assert.equal(error.retryAfter, 0);
      proxy.answerNext(0, appends, 200);

      await ctx.append(id, toolStep.slice(1));
      const deletes = (s: Seen) => s.method === "DELETE";
      proxy.loseNext(1, deletes);
      await assert.rejects(ctx2.deleteTail(id, 3), TransportError);
      assert.equal(proxy.matching(deletes).length, 1, "sent once: a second try could delete a newer tail");
      assert.deepEqual((await ctx.allMessages(id)).map((m) => m.seq), [1, 2]);
    } finally {
      await proxy.stop();
    }
  });

  test("a connection refused is a TransportError after the retries", async () => {
    const dead = new ContextdClient({ baseUrl: "http://127.0.0.1:9", retry: new Retry({ maxRetries: 2, backoff: 0.001 }) });
    const error = await dead.getSession("x").catch((e: unknown) => e);
    assert.ok(error instanceof TransportError);
    assert.ok(error.cause);
  });

  test("bad input is a ValidationFailed naming the field, and nothing is written", async () => {
    const id = sessionId();
    await ctx.append(id, toolStep.slice(0, 1));
    const bad = [{ role: "user", content: "fine" }, { role: "tool", content: "no call id" }] as ChatMessage[];
    const error = await ctx.append(id, bad).catch((e: unknown) => e);
    assert.ok(error instanceof ValidationFailed, String(error));
    assert.equal(error.status, 422);
    assert.equal(error.code, "validation_error");
    assert.ok(error.fields.some((f) => f.startsWith("messages[1]")), error.fields.join(", "));
    assert.equal((await ctx.allMessages(id)).length, 1);
  });

  test("tail reads, single message, tail delete and clear", async () => {
    const id = sessionId();
    await ctx.putSession(id, { system_prompt: "stay" });
    await ctx.append(id, toolStep);
    const tail = await ctx.tail(id, 2);
    assert.deepEqual(tail.map((m) => m.seq), [3, 4]);
    const desc = await ctx.messages(id, { order: "desc", limit: 1 });
    assert.deepEqual(desc.messages.map((m) => m.seq), [4]);
    const one = await ctx.message(id, 3, { line_start: 2, line_end: 2 });
    assert.equal(one.seq, 3);
    assert.match(String(one.content), /second line/);
    const deleted = await ctx.deleteTail(id, 4);
    assert.equal(deleted.deleted_count, 1);
    assert.equal(deleted.last_seq, 3);
    const again = await ctx.append(id, [{ role: "assistant", content: "redo" }]);
    assert.deepEqual(again.messages.map((m) => m.seq), [4], "seqs are reused after a tail delete");
    const cleared = await ctx.clear(id);
    assert.equal(cleared.deleted_count, 4);
    assert.equal((await ctx.allMessages(id)).length, 0);
    assert.equal((await ctx.getSession(id)).system_prompt, "stay");
  });

  test("leases: held, required, stale; withLease renews and releases", async () => {
    const id = sessionId();
    await ctx.append(id, toolStep.slice(0, 1));
    const lease = await ctx.claimLease(id, "worker-a", 30);
    const held = await ctx.claimLease(id, "worker-b").catch((e: unknown) => e);
    assert.ok(held instanceof LockHeld);
    assert.equal(held.holder, "worker-a");
    await assert.rejects(ctx.append(id, [{ role: "assistant", content: "x" }]), LockRequired);
    await ctx.append(id, [{ role: "assistant", content: "with token" }], { lockToken: lease.lock_token });
    await ctx.releaseLease(id, lease.lock_token);
    const next = await ctx.claimLease(id, "worker-b");
    await assert.rejects(ctx.append(id, [{ role: "user", content: "old" }], { lockToken: lease.lock_token }), StaleLockToken);
    await ctx.releaseLease(id, next.lock_token);

    const seqs = await ctx.withLease(
      id,
      "worker-c",
      async (l) => {
        await new Promise((r) => setTimeout(r, 300)); // a few renewals
        assert.equal(l.lost, undefined);
        return (await ctx.append(id, [{ role: "user", content: "leased" }], { lockToken: l.lock_token })).messages.map((m) => m.seq);
      },
      { ttlS: 30, renewEvery: 0.1 }, // renewals every 0.1 s; no expiry a busy machine could reach
    );
    assert.deepEqual(seqs, [3]);
    const free = await ctx.claimLease(id, "worker-d"); // released at the end of withLease
    await ctx.releaseLease(id, free.lock_token);
  });

  test("context in all three formats, budget, preview, compaction, events, tokens", async () => {
    const id = sessionId();
    await ctx.putSession(id, { model: "gpt-4o-mini", system_prompt: "You read files." });
    await ctx.append(id, toolStep);
    const openai = await ctx.context(id);
    assert.equal(openai.format, "openai");
    assert.equal(openai.messages?.[0]?.role, "system");
    assert.deepEqual(openai.kept_seqs, [1, 2, 3, 4]);
    assert.ok(openai.usage.input_tokens > 0);
    assert.ok(openai.prefix_id);
    const responses = await ctx.context(id, { format: "responses" });
    assert.ok(responses.input?.some((i) => i.type === "function_call"));
    const anthropic = await ctx.context(id, { format: "anthropic", max_tokens: 2000 });
    assert.ok(anthropic.system);
    const posted = await ctx.context(id, { system: "Per call.", dynamic_context: ["goal: read"] });
    assert.match(JSON.stringify(posted.messages), /Per call\./);

    const budget = await ctx.budget(id);
    assert.equal(budget.status, "ok");
    const found = await ctx.search(id, { q: "second line" });
    assert.equal(found.hits[0]?.seq, 3); // the tool output holding both words ranks first
    const users = await ctx.search(id, { q: "second line", roles: ["user"] });
    assert.ok(users.hits.every((h) => h.role === "user"));
    // The Python client's shape too: the query as a string, the rest as options (from
    // JavaScript this was sent as a query of the string's characters: 422 q).
    assert.deepEqual(await ctx.search(id, "second line"), found);
    const one = await ctx.search(id, "second line", { limit: 1 });
    assert.deepEqual(one.hits.map((h) => h.seq), [3]);
    const untyped = ctx.search as (sid: string, q: unknown) => Promise<unknown>;
    assert.deepEqual(await untyped.call(ctx, id, "second line"), found);
    const preview = await ctx.previewBudget(id, [{ role: "user", content: "more" }]);
    assert.equal(preview.fits, true);
    const job = await ctx.compact(id, { wait: true, force: true });
    assert.ok("status" in job);
    const state = await ctx.compaction(id);
    assert.equal(typeof state.last_compaction_seq, "number");
    const events = await ctx.events(id);
    assert.ok(Array.isArray(events.events));
    const count = await ctx.countTokens({ model: "gpt-4o-mini", text: "hello world" });
    assert.ok(count.total > 0);
    assert.deepEqual(await ctx.health(), { status: "ok" });
    assert.equal((await ctx.ready()).status, "ready");
  });

  test("the prefix id of a stream is echoed on its next context call", async () => {
    const proxy = await new LossyProxy(contextdUrl()).start();
    try {
      const ctx2 = client(proxy.baseUrl);
      const id = sessionId();
      await ctx2.append(id, toolStep.slice(0, 1));
      const first = await ctx2.context(id);
      await ctx2.append(id, toolStep.slice(1));
      const second = await ctx2.context(id);
      const gets = proxy.matching((s) => s.path.includes("/context"));
      assert.ok(!gets[0]!.path.includes("previous_prefix_id"));
      assert.ok(gets[1]!.path.includes(`previous_prefix_id=${encodeURIComponent(first.prefix_id!)}`));
      assert.ok((second.usage.stable_prefix_tokens ?? 0) > 0);
    } finally {
      await proxy.stop();
    }
  });
});

// Keep the event loop free of stray timers between files.
before(() => undefined);
after(() => undefined);
