import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Conflict, NotFound, StaleLockToken, type ChatMessage } from "../src/index.js";
import { client, sessionId } from "./support/server.js";

// Enough turns that a forced compaction has something to summarize (the preserved
// tail keeps the last few turns whole).
const history: ChatMessage[] = Array.from({ length: 14 }, (_, i): ChatMessage[] => [
  { role: "user", content: `question ${i}: what does line ${i} of notes.txt say? ${"context ".repeat(40)}` },
  { role: "assistant", content: `line ${i} says item ${i}. ${"detail ".repeat(40)}` },
]).flat();

describe("revertCompaction", () => {
  const ctx = client();

  test("puts back the state the latest compaction replaced, fenced by the lease", async () => {
    const id = sessionId();
    await ctx.append(id, history);
    const before = await ctx.compaction(id);
    assert.equal(before.revertable_job_id ?? null, null);
    const lease = await ctx.claimLease(id, "agent", 60);
    const job = await ctx.compact(id, { wait: true, force: true }, lease.lock_token);
    const { job_id: jobId, status } = job as { job_id: string; status: string };
    assert.ok(status === "success" || status === "degraded", JSON.stringify(job));
    const compacted = await ctx.compaction(id);
    assert.equal(compacted.revertable_job_id, jobId);
    assert.ok(compacted.last_compaction_seq > 0);

    await assert.rejects(ctx.revertCompaction(id, jobId, "not-the-token"), StaleLockToken);
    await assert.rejects(ctx.revertCompaction(id, "f".repeat(32), lease.lock_token), NotFound);
    const out = await ctx.revertCompaction(id, jobId, lease.lock_token);
    assert.equal(out.job_id, jobId);
    assert.equal(out.watermark_restored, 0);
    assert.equal(out.watermark_reverted, compacted.last_compaction_seq);
    assert.equal(out.summary_restored, false);
    const after = await ctx.compaction(id);
    assert.equal(after.last_compaction_seq, 0);
    assert.deepEqual(after.summary, before.summary);
    assert.equal(after.revertable_job_id ?? null, null);
    const again = await ctx.revertCompaction(id, jobId, lease.lock_token).catch((e: unknown) => e);
    assert.ok(again instanceof Conflict && again.code === "already_reverted", String(again));
    await ctx.releaseLease(id, lease.lock_token);
  });
});
