import assert from "node:assert/strict";
import { before, test } from "node:test";
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool, type AgentInputItem } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";
import { Retry } from "../src/index.js";
import { ContextdSession } from "../src/agents.js";
import { RecordingClient, seedLargeOutput, shape } from "./support/payloads.js";
import type { Seen } from "./support/proxy.js";
import { scriptedModelAndProxy } from "./support/scripted.js";
import { client, sessionId } from "./support/server.js";

const { model, proxy } = scriptedModelAndProxy();
before(() => setTracingDisabled(true));

const readFile = tool({
  name: "read_file",
  description: "Read a file",
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => `first line of ${path}\nsecond line`,
});

function agent(): Agent {
  const openai = new OpenAI({ baseURL: model.baseUrl, apiKey: "none", maxRetries: 0 });
  return new Agent({
    name: "reader",
    instructions: "You read files.",
    model: new OpenAIChatCompletionsModel(openai, "scripted"),
    tools: [readFile],
  });
}

class Recorded extends ContextdSession {
  readonly added: AgentInputItem[][] = [];
  override async addItems(items: AgentInputItem[]): Promise<void> {
    this.added.push(items);
    await super.addItems(items);
  }
}

test("Agents SDK: the model reads contextd's payload, and every item is logged once through a lost answer", async () => {
  const ctx = new RecordingClient({ baseUrl: proxy.baseUrl, retry: new Retry({ backoff: 0.01 }) });
  const id = sessionId("agents");
  const session = new Recorded(id, { client: ctx });
  await session.addItems([{ role: "user", content: "hi" }, { role: "assistant", content: "Hello." } as unknown as AgentInputItem]);
  const before = model.calls.length;
  const toolSteps = (s: Seen) => s.method === "POST" && s.path.includes(id) && s.path.endsWith("/messages") && s.body.includes('"role":"tool"');
  proxy.loseNext(1, toolSteps);

  const result = await run(agent(), "Please read notes.txt", { session, callModelInputFilter: session.callModelInputFilter });
  assert.equal(result.finalOutput, "The file says: first line of notes.txt");

  const sent = model.calls.slice(before);
  assert.equal(sent.length, 2);
  // Exactly the payload, the agent's instructions as its system block.
  sent.forEach((call, i) => assert.deepEqual(shape(call.messages), shape(ctx.payloads[i]!.messages as never[])));
  assert.deepEqual(shape(sent[0]!.messages)[0], { role: "system", text: "You read files.", calls: [], answers: null });
  assert.deepEqual(sent[1]!.messages.map((m) => m.role), ["system", "user", "assistant", "user", "assistant", "tool"]);
  // The agent's tools were budgeted: the payload's tools are the agent's.
  assert.deepEqual(ctx.payloads[0]!.tools?.map((t) => (t.function as { name: string }).name), ["read_file"]);
  assert.equal(proxy.matching(toolSteps).length, 2, "the tool step's append was retried");

  const log = await client().allMessages(id);
  assert.deepEqual(log.map((m) => [m.seq, m.role]), [
    [1, "user"], [2, "assistant"], [3, "user"], [4, "assistant"], [5, "tool"], [6, "assistant"],
  ]);
  assert.equal(log[5]!.content, "The file says: first line of notes.txt");

  // A second turn: the history is read again, nothing stored twice.
  const second = await run(agent(), "Now read todo.md", { session, callModelInputFilter: session.callModelInputFilter });
  assert.equal(second.finalOutput, "The file says: first line of todo.md");
  const after = await client().allMessages(id);
  assert.equal(after.length, 10);
  assert.deepEqual(after.slice(6).map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  const items = await session.getItems();
  assert.deepEqual(items.map((i) => (i as { type?: string }).type ?? "message"), [
    "message", "message", "message", "function_call", "function_call_result", "message",
    "message", "function_call", "function_call_result", "message",
  ]);
});

test("Agents SDK session: items round-trip, getItems(limit), popItem splits parallel calls, clearSession keeps settings", async () => {
  const id = sessionId("agents");
  const session = new ContextdSession(id, { client: client() });
  await client().putSession(id, { system_prompt: "stay" });
  const items = [
    { type: "message", role: "user", content: "read a and b" },
    { type: "function_call", callId: "c1", name: "read_file", arguments: '{"path":"a"}', status: "completed" },
    { type: "function_call", callId: "c2", name: "read_file", arguments: '{"path":"b"}', status: "completed" },
    { type: "function_call_result", callId: "c1", name: "read_file", status: "completed", output: { type: "text", text: "A" } },
    { type: "function_call_result", callId: "c2", name: "read_file", status: "completed", output: { type: "text", text: "B" } },
    { type: "reasoning", content: [{ type: "input_text", text: "thinking" }] },
  ] as unknown as AgentInputItem[];
  await session.addItems(items);
  const log = await client().allMessages(id);
  assert.deepEqual(log.map((m) => m.role), ["user", "assistant", "tool", "tool", "assistant"]);
  assert.equal((log[1]!.tool_calls as unknown[]).length, 2, "parallel calls share one message");
  assert.equal(log[4]!.include_in_context, false, "reasoning stays out of payloads");
  assert.deepEqual(await session.getItems(), JSON.parse(JSON.stringify(items)));
  assert.deepEqual(await session.getItems(2), JSON.parse(JSON.stringify(items.slice(-2))));

  assert.deepEqual(await session.popItem(), JSON.parse(JSON.stringify(items[5])));
  await session.popItem(); // c2's result
  await session.popItem(); // c1's result
  const popped = await session.popItem(); // c2's call: its message is stored again with c1 only
  assert.equal((popped as { callId?: string }).callId, "c2");
  assert.deepEqual(await session.getItems(), JSON.parse(JSON.stringify(items.slice(0, 2))));
  await session.clearSession();
  assert.deepEqual(await session.getItems(), []);
  assert.equal((await client().getSession(id)).system_prompt, "stay");
});

test("Agents SDK: a large old tool output reaches the model as contextd's preview, not in full", async () => {
  const ctx = client();
  const id = sessionId("agents");
  const big = await seedLargeOutput(ctx, id);
  const session = new ContextdSession(id, { client: ctx, context: { preview_limit_tokens: 100 } });
  const before = model.calls.length;
  const result = await run(agent(), "Please read notes.txt", { session, callModelInputFilter: session.callModelInputFilter });
  assert.equal(result.finalOutput, "The file says: first line of notes.txt");
  const oldOutput = model.calls[before + 1]!.messages.find((m) => m.role === "tool" && m.tool_call_id === "old_1");
  assert.ok(oldOutput, "the old tool group is in the payload, whole");
  assert.ok(JSON.stringify(oldOutput.content).length < big.length / 4, "a preview, not the output");
  assert.equal((await ctx.allMessages(id)).length, 8, "the SDK's own persistence stored nothing twice");
  assert.equal((await ctx.message(id, 3)).content, big);
});
