import assert from "node:assert/strict";
import { test } from "node:test";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { ChatPromptTemplate, MessagesPlaceholder } from "@langchain/core/prompts";
import { RunnableWithMessageHistory } from "@langchain/core/runnables";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { Retry } from "../src/index.js";
import { ContextdChatMessageHistory, contextdHooks } from "../src/langchain.js";
import { RecordingClient, seedLargeOutput, shape } from "./support/payloads.js";
import type { Seen } from "./support/proxy.js";
import { chatOn, readFile } from "./support/langchain.js";
import { scriptedModelAndProxy } from "./support/scripted.js";
import { client, contextdUrl, sessionId } from "./support/server.js";

const { model, proxy } = scriptedModelAndProxy();

const chat = () => chatOn(model);

test("the history gives back exactly the messages it was given, stored once per id", async () => {
  const history = new ContextdChatMessageHistory(sessionId("lc"), { client: client() });
  const messages = [
    new HumanMessage({ content: "read notes.txt", id: "h-1" }),
    new AIMessage({ content: "", id: "a-1", tool_calls: [{ id: "call_9", name: "read_file", args: { path: "notes.txt" }, type: "tool_call" }] }),
    new ToolMessage({ content: "first line", tool_call_id: "call_9", id: "t-1" }),
    new AIMessage({ content: "It says: first line", id: "a-2" }),
  ];
  await history.addMessages(messages);
  await history.addMessages(messages.slice(2)); // a replay: same ids
  const back = await history.getMessages();
  assert.equal(back.length, 4);
  assert.deepEqual(back.map((m) => m.getType()), ["human", "ai", "tool", "ai"]);
  assert.deepEqual((back[1] as AIMessage).tool_calls?.map((c) => [c.id, c.name, c.args]), [["call_9", "read_file", { path: "notes.txt" }]]);
  assert.equal((back[2] as ToolMessage).tool_call_id, "call_9");
  assert.deepEqual(back.map((m) => m.id), ["h-1", "a-1", "t-1", "a-2"]);
  await history.clear();
  assert.deepEqual(await history.getMessages(), []);
});

test("a fitted history of a session not created yet is empty, and the first turn creates it", async () => {
  const id = sessionId("lc-new");
  const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder("history"), ["human", "{input}"]]);
  const chain = new RunnableWithMessageHistory({
    runnable: prompt.pipe(chat()),
    getMessageHistory: (sid: string) => new ContextdChatMessageHistory(sid, { client: client(), fitted: true }),
    inputMessagesKey: "input",
    historyMessagesKey: "history",
  });
  assert.deepEqual(await new ContextdChatMessageHistory(id, { client: client(), fitted: true }).getMessages(), []);
  const answer = await chain.invoke({ input: "hello" }, { configurable: { sessionId: id } });
  assert.equal(answer.content, "Hello.");
  assert.deepEqual((await client().allMessages(id)).map((m) => m.role), ["user", "assistant"]);
});

test("RunnableWithMessageHistory: the model reads contextd's payload, input and answer are stored once", async () => {
  const ctx = new RecordingClient({ baseUrl: contextdUrl() });
  const id = sessionId("lc");
  await ctx.putSession(id, { system_prompt: "You are terse." });
  await ctx.append(id, [{ role: "user", content: "hi" }, { role: "assistant", content: "Hello." }]);
  const prompt = ChatPromptTemplate.fromMessages([new MessagesPlaceholder("history"), ["human", "{input}"]]);
  const chain = new RunnableWithMessageHistory({
    runnable: prompt.pipe(chat()),
    getMessageHistory: (sid: string) => new ContextdChatMessageHistory(sid, { client: ctx, fitted: true }),
    inputMessagesKey: "input",
    historyMessagesKey: "history",
  });
  const before = model.calls.length;
  const answer = await chain.invoke({ input: "how are you" }, { configurable: { sessionId: id } });
  assert.equal(answer.content, "Hello.");
  const sent = model.calls.slice(before);
  assert.equal(sent.length, 1);
  const payload = ctx.payloads[0]!.messages as never[];
  assert.deepEqual(shape(sent[0]!.messages), [...shape(payload), { role: "user", text: "how are you", calls: [], answers: null }]);
  const log = await ctx.allMessages(id);
  assert.deepEqual(log.map((m) => [m.role, m.content]), [
    ["user", "hi"],
    ["assistant", "Hello."],
    ["user", "how are you"],
    ["assistant", "Hello."],
  ]);
});

test("LangGraph createReactAgent with contextdHooks: payload in, every step logged once through a lost answer", async () => {
  const ctx = new RecordingClient({ baseUrl: proxy.baseUrl, retry: new Retry({ backoff: 0.01 }) });
  const id = sessionId("lc");
  await ctx.putSession(id, { system_prompt: "You read files." });
  await ctx.append(id, [{ role: "user", content: "hi" }, { role: "assistant", content: "Hello." }]);
  const history = new ContextdChatMessageHistory(id, { client: ctx });
  const agent = createReactAgent({ llm: chat(), tools: [readFile], ...contextdHooks(history) });
  const toolResults = (s: Seen) => s.method === "POST" && s.path.includes(id) && s.path.endsWith("/messages") && s.body.includes('"role":"tool"');
  proxy.loseNext(1, toolResults);
  const before = model.calls.length;

  const result = await agent.invoke({ messages: [new HumanMessage("Please read notes.txt")] });
  const last = result.messages[result.messages.length - 1]!;
  assert.equal(last.content, "The file says: first line of notes.txt");

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
  // The graph state holds the agent's own messages; the log gives the same ones back.
  const back = await history.getMessages();
  assert.deepEqual(back.slice(2).map((m) => m.id), result.messages.map((m) => m.id));
  assert.equal(back[0]!.getType(), "human");
});

test("LangGraph: a large old tool output reaches the model as contextd's preview, not in full", async () => {
  const ctx = client();
  const id = sessionId("lc");
  const big = await seedLargeOutput(ctx, id);
  const history = new ContextdChatMessageHistory(id, { client: ctx, context: { preview_limit_tokens: 100 } });
  const agent = createReactAgent({ llm: chat(), tools: [readFile], ...contextdHooks(history) });
  const before = model.calls.length;
  await agent.invoke({ messages: [new HumanMessage("Please read notes.txt")] });
  const oldOutput = model.calls[before + 1]!.messages.find((m) => m.role === "tool" && m.tool_call_id === "old_1");
  assert.ok(oldOutput, "the old tool group is in the payload, whole");
  assert.ok(JSON.stringify(oldOutput.content).length < big.length / 4, "a preview, not the output");
  assert.equal((await ctx.allMessages(id)).length, 8);
});
