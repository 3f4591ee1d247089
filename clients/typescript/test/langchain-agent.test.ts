import assert from "node:assert/strict";
import { test } from "node:test";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { createAgent } from "langchain";
import { Retry } from "../src/index.js";
import { PAYLOAD_ID_PREFIX, contextdMiddleware } from "../src/langchain-agent.js";
import { RecordingClient, seedLargeOutput, shape } from "./support/payloads.js";
import type { Seen } from "./support/proxy.js";
import { chatOn, readFile } from "./support/langchain.js";
import { scriptedModelAndProxy } from "./support/scripted.js";
import { client, sessionId } from "./support/server.js";

const { model, proxy } = scriptedModelAndProxy();

const chat = () => chatOn(model);

test("createAgent with contextdMiddleware: payload in, every step logged once through a lost answer", async () => {
  const ctx = new RecordingClient({ baseUrl: proxy.baseUrl, retry: new Retry({ backoff: 0.01 }) });
  const id = sessionId("lc-agent");
  await ctx.putSession(id, { system_prompt: "You read files." });
  await ctx.append(id, [{ role: "user", content: "hi" }, { role: "assistant", content: "Hello." }]);
  const agent = createAgent({ model: chat(), tools: [readFile], middleware: [contextdMiddleware(id, { client: ctx })] });
  const toolResults = (s: Seen) => s.method === "POST" && s.path.includes(id) && s.path.endsWith("/messages") && s.body.includes('"role":"tool"');
  proxy.loseNext(1, toolResults);
  const before = model.calls.length;

  const result = await agent.invoke({ messages: [new HumanMessage("Please read notes.txt")] });
  assert.equal(result.messages.at(-1)!.content, "The file says: first line of notes.txt");

  const sent = model.calls.slice(before);
  assert.equal(sent.length, 2);
  sent.forEach((call, i) => assert.deepEqual(shape(call.messages), shape(ctx.payloads[i]!.messages as never[])));
  assert.equal(sent[0]!.messages[0]!.role, "system");
  assert.equal(proxy.matching(toolResults).length, 2, "the tool result's append was retried");

  const log = await client().allMessages(id);
  assert.deepEqual(log.map((m) => [m.seq, m.role]), [
    [1, "user"], [2, "assistant"], [3, "user"], [4, "assistant"], [5, "tool"], [6, "assistant"],
  ]);
  assert.equal(log[5]!.content, "The file says: first line of notes.txt");
  // The graph state is the last payload and the answer, not the whole run.
  assert.ok(result.messages.slice(0, -1).every((m) => m.id?.startsWith(PAYLOAD_ID_PREFIX)));
});

test("createAgent with a checkpointer: a second turn on the thread stores only what is new", async () => {
  const ctx = client();
  const id = sessionId("lc-agent");
  await ctx.putSession(id, { system_prompt: "You read files." });
  const agent = createAgent({
    model: chat(),
    tools: [readFile],
    middleware: [contextdMiddleware(id, { client: ctx })],
    checkpointer: new MemorySaver(),
  });
  const config = { configurable: { thread_id: id } };
  await agent.invoke({ messages: [new HumanMessage("Please read a.txt")] }, config);
  const before = model.calls.length;
  const second = await agent.invoke({ messages: [new HumanMessage("Please read b.txt")] }, config);
  assert.equal(second.messages.at(-1)!.content, "The file says: first line of b.txt");

  const log = await ctx.allMessages(id);
  assert.deepEqual(log.map((m) => m.role), ["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant"]);
  assert.deepEqual(log.filter((m) => m.role === "user").map((m) => m.content), ["Please read a.txt", "Please read b.txt"]);
  // The second turn's first call reads the first turn from contextd, answer included.
  const first = model.calls[before]!.messages.map((m) => m.role);
  assert.deepEqual(first, ["system", "user", "assistant", "tool", "assistant", "user"]);
});

test("createAgent: a large old tool output reaches the model as contextd's preview, not in full", async () => {
  const ctx = client();
  const id = sessionId("lc-agent");
  const big = await seedLargeOutput(ctx, id);
  const middleware = contextdMiddleware(id, { client: ctx, context: { preview_limit_tokens: 100 } });
  const agent = createAgent({ model: chat(), tools: [readFile], middleware: [middleware] });
  const before = model.calls.length;
  await agent.invoke({ messages: [new HumanMessage("Please read notes.txt")] });
  const oldOutput = model.calls[before + 1]!.messages.find((m) => m.role === "tool" && m.tool_call_id === "old_1");
  assert.ok(oldOutput, "the old tool group is in the payload, whole");
  assert.ok(JSON.stringify(oldOutput.content).length < big.length / 4, "a preview, not the output");
  assert.equal((await ctx.allMessages(id)).length, 8);
});
