import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { ChatMessage, ContextUsage, SessionBill } from "../src/index.js";
import { client, sessionId } from "./support/server.js";

const SYSTEM = Array.from({ length: 120 }, (_, k) => `Rule ${k}: keep file src/rule_${k}.py unchanged unless asked.`).join(" ");

function step(i: number, callId = `c${i}`): ChatMessage[] {
  const out = Array.from({ length: 20 }, (_, k) => `line ${k}: v_${i}_${k} = ${i * 97 + k}`).join("\n");
  return [
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: callId, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: `src/mod_${i}.py` }) } }],
    },
    { role: "tool", tool_call_id: callId, content: out },
  ];
}

describe("the bill and the re-reads against a real contextd", () => {
  const ctx = client();

  test("usage carries the call's bill; stats the sums and the re-reads; a report replaces the estimate", async () => {
    const id = sessionId();
    await ctx.putSession(id, { model: "gpt-4o", system_prompt: SYSTEM });
    await ctx.append(id, [{ role: "user", content: "Audit the repo." }]);
    const usages: ContextUsage[] = [];
    for (let i = 0; i < 12; i++) {
      await ctx.append(id, step(i));
      usages.push((await ctx.context(id, { max_tokens: 3000 })).usage);
    }
    const last = usages[usages.length - 1] as ContextUsage;
    assert.equal(last.cache_provider, "openai");
    assert.ok((last.cached_input_tokens ?? 0) > 0);
    assert.ok((last.full_history_input_tokens ?? 0) > last.input_tokens);
    await ctx.append(id, step(0, "again0").slice(0, 1)); // the oldest read, again
    const stats = (await ctx.getSession(id)).stats;
    assert.equal(stats.re_reads, 1);
    const bill = stats.bill as SessionBill;
    assert.equal(bill.calls, usages.length);
    assert.equal(bill.cached_input_tokens, usages.reduce((n, u) => n + (u.cached_input_tokens ?? 0), 0));
    const report = await ctx.reportUsage(id, {
      input_tokens: last.input_tokens,
      uncalibrated_input_tokens: last.uncalibrated_input_tokens,
      cached_input_tokens: 0,
      estimated_cached_input_tokens: last.cached_input_tokens,
    });
    assert.equal(report.bill_replaced, true);
    const after = (await ctx.getSession(id)).stats.bill as SessionBill;
    assert.equal(after.cached_input_tokens, bill.cached_input_tokens - (last.cached_input_tokens ?? 0));
    assert.equal(after.reported_calls, 1);
  });
});
