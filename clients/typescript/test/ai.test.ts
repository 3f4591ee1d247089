import assert from "node:assert/strict";
import { test } from "node:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { Experimental_Agent as Agent, generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { Retry } from "../src/index.js";
import { ContextdMemory } from "../src/ai.js";
import { RecordingClient, seedLargeOutput, shape } from "./support/payloads.js";
import type { Seen } from "./support/proxy.js";
import { scriptedModelAndProxy } from "./support/scripted.js";
import { client, sessionId } from "./support/server.js";

const { model, proxy } = scriptedModelAndProxy();

const tools = {
  read_file: tool({
    description: "Read a file",
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }) => `first line of ${path}\nsecond line`,
  }),
};
const stepAppends = (s: Seen) => s.method === "POST" && s.path.endsWith("/messages") && s.body.includes("tool_calls");

for (const mode of ["generateText", "streamText", "Agent"] as const) {
  test(`AI SDK ${mode}: the model reads contextd's payload, and every step is logged once through a lost answer`, async () => {
    const ctx = new RecordingClient({ baseUrl: proxy.baseUrl, retry: new Retry({ backoff: 0.01 }) });
    const id = sessionId("ai");
    await ctx.putSession(id, { model: "gpt-4o-mini", system_prompt: "You read files." });
    // An old turn, so the payload is more than this call's input.
    await ctx.append(id, [{ role: "user", content: "hi" }, { role: "assistant", content: "Hello." }]);
    const memory = new ContextdMemory({ sessionId: id, client: ctx, tools });
    const provider = createOpenAICompatible({ name: "scripted", baseURL: model.baseUrl });
    const before = model.calls.length;
    proxy.loseNext(1, stepAppends);

    const options = {
      model: provider("scripted"),
      tools,
      stopWhen: stepCountIs(5),
      prompt: "Please read notes.txt",
      prepareStep: memory.prepareStep,
      onStepFinish: memory.onStepFinish,
    };
    let answer: string;
    if (mode === "generateText") {
      answer = (await generateText(options)).text;
    } else if (mode === "Agent") {
      const { prompt, ...settings } = options;
      answer = (await new Agent(settings).generate({ prompt })).text;
    } else {
      const result = streamText(options);
      answer = await result.text;
    }
    assert.equal(answer, "The file says: first line of notes.txt");

    const calls = model.calls.slice(before);
    assert.equal(calls.length, 2);
    assert.equal(ctx.payloads.length, 2);
    calls.forEach((call, i) => assert.deepEqual(shape(call.messages), shape(ctx.payloads[i]!.messages as never[])));
    assert.deepEqual(
      calls[1]!.messages.map((m) => m.role),
      ["system", "user", "assistant", "user", "assistant", "tool"],
    );

    assert.equal(proxy.matching(stepAppends).filter((s) => s.path.includes(id)).length, 2, "the step's append was retried");
    const log = await client().allMessages(id);
    assert.deepEqual(
      log.map((m) => [m.seq, m.role]),
      [[1, "user"], [2, "assistant"], [3, "user"], [4, "assistant"], [5, "tool"], [6, "assistant"]],
    );
    assert.equal(new Set(log.map((m) => m.id)).size, log.length);
    assert.equal(log[5]!.content, "The file says: first line of notes.txt");
    const history = await memory.history();
    assert.equal(history.length, 6);
    const callId = (log[3]!.tool_calls as { id: string }[])[0]!.id;
    assert.deepEqual(history[4], {
      role: "tool",
      content: [{ type: "tool-result", toolCallId: callId, toolName: "read_file", output: { type: "text", value: "first line of notes.txt\nsecond line" } }],
    });
  });
}

test("AI SDK: a tool output is stored once, without a copy in the metadata, and read back as it was", async () => {
  const ctx = client();
  const id = sessionId("ai");
  const big = `first line of big.log\n${"x".repeat(1_200_000)}`; // 2.4 MB with a copy: over the 2 MB per-message limit
  const bigTools = { read_file: tool({ description: "Read a file", inputSchema: z.object({ path: z.string() }), execute: async () => big }) };
  const memory = new ContextdMemory({ sessionId: id, client: ctx, tools: bigTools, context: { preview_limit_tokens: 200 } });
  const provider = createOpenAICompatible({ name: "scripted", baseURL: model.baseUrl });
  const result = await generateText({
    model: provider("scripted"),
    tools: bigTools,
    stopWhen: stepCountIs(5),
    prompt: "Please read big.log",
    prepareStep: memory.prepareStep,
    onStepFinish: memory.onStepFinish,
  });
  assert.match(result.text, /^The file says: /);
  const log = await ctx.allMessages(id);
  assert.deepEqual(log.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(log[2]!.content, big);
  assert.equal(log[2]!.metadata ?? null, null);
  const history = await memory.history();
  const callId = (log[1]!.tool_calls as { id: string }[])[0]!.id;
  assert.deepEqual(history[2], {
    role: "tool",
    content: [{ type: "tool-result", toolCallId: callId, toolName: "read_file", output: { type: "text", value: big } }],
  });
});

test("AI SDK: a large old tool output reaches the model as contextd's preview, not in full", async () => {
  const ctx = client();
  const id = sessionId("ai");
  const big = await seedLargeOutput(ctx, id);
  const memory = new ContextdMemory({ sessionId: id, client: ctx, tools, context: { preview_limit_tokens: 100 } });
  const provider = createOpenAICompatible({ name: "scripted", baseURL: model.baseUrl });
  const before = model.calls.length;
  const result = await generateText({
    model: provider("scripted"),
    tools,
    stopWhen: stepCountIs(5),
    prompt: "Please read notes.txt",
    prepareStep: memory.prepareStep,
    onStepFinish: memory.onStepFinish,
  });
  assert.equal(result.text, "The file says: first line of notes.txt");
  const sent = model.calls.slice(before);
  const oldOutput = sent[1]!.messages.find((m) => m.role === "tool" && m.tool_call_id === "old_1");
  assert.ok(oldOutput, "the old tool group is in the payload, whole");
  const shown = JSON.stringify(oldOutput.content);
  assert.ok(shown.length < big.length / 4, "a preview, not the output");
  assert.match(shown, new RegExp(`/sessions/${id}/messages/3`));
  assert.equal((await ctx.message(id, 3)).content, big, "the log keeps the output in full");
});
