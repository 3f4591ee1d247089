import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { HumanMessage } from "@langchain/core/messages";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled } from "@openai/agents";
import { generateText, stepCountIs } from "ai";
import { createAgent } from "langchain";
import OpenAI from "openai";
import { ContextdClient, NO_ARGUMENTS, RANGE_MAX_MESSAGES, RECALL_TOOL_NAME, recallTool as chatRecallTool, runRecall } from "../src/index.js";
import { pyRepr } from "../src/recall.js";
import { ContextdMemory } from "../src/ai.js";
import { ContextdSession } from "../src/agents.js";
import { ContextdChatMessageHistory, contextdHooks, recallTool } from "../src/langchain.js";
import { contextdMiddleware } from "../src/langchain-agent.js";
import { ScriptedModel, text, type ChatRequest } from "../examples/scripted-model.js";
import { client, sessionId } from "./support/server.js";

const model = new ScriptedModel();
before(async () => {
  setTracingDisabled(true);
  await model.start();
});
after(() => model.stop());

const CODE = "ZX-48151";
const FORGOTTEN = `error ${CODE}: checksum mismatch in parser.rs`;
const BUDGET = 2000;

/** An old tool output with a code on its line 201, then enough work that no payload at
 * `BUDGET` tokens holds it any more. */
async function seedForgotten(ctx: ContextdClient, id: string): Promise<void> {
  const log = Array.from({ length: 400 }, (_, i) => (i === 200 ? FORGOTTEN : `log line ${i + 1}: all fine`)).join("\n");
  await ctx.putSession(id, { system_prompt: "You fix the build.", recall: false });
  await ctx.append(id, [
    { role: "user", content: "Build the parser." },
    { role: "assistant", content: null, tool_calls: [{ id: "b1", type: "function", function: { name: "shell", arguments: '{"cmd":"make"}' } }] },
    { role: "tool", tool_call_id: "b1", content: log },
  ]);
  for (let i = 0; i < 30; i++) {
    await ctx.append(id, [
      { role: "assistant", content: null, tool_calls: [{ id: `s${i}`, type: "function", function: { name: "shell", arguments: `{"cmd":"ls part${i}"}` } }] },
      { role: "tool", tool_call_id: `s${i}`, content: `part${i}/a.rs part${i}/b.rs part${i}/c.rs part${i}/mod.rs: nothing changed in step ${i}` },
    ]);
  }
}

/** The model's calls of one run: the recall tool offered and the note there, the code
 * left out at first, then found by a search, then read from the log. */
function checkRun(calls: ChatRequest[]): void {
  const tools = (c: ChatRequest) => (c.tools ?? []).map((t) => t.function.name);
  const all = (c: ChatRequest) => c.messages.map((m) => text(m.content)).join("\n");
  const lastTool = (c: ChatRequest) => text([...c.messages].reverse().find((m) => m.role === "tool")?.content);
  assert.equal(calls.length, 3, "search, read, answer");
  assert.ok(tools(calls[0]!).includes(RECALL_TOOL_NAME));
  assert.ok(calls[0]!.messages.some((m) => m.role === "system" && /not shown here/.test(text(m.content))), "the recall note");
  assert.ok(!calls[0]!.messages.some((m) => m.tool_call_id === "b1"), "the old output is out of the payload");
  assert.ok(!all(calls[0]!).includes(FORGOTTEN));
  // The user's question (and, where the framework logs a call before running it, the
  // call itself) match too: the model reads the tool output's hit.
  assert.match(lastTool(calls[1]!), new RegExp(`^\\d messages match '${CODE}'.*\\nseq 3 \\(tool shell\\) line 201: .*${CODE}`, "s"));
  const read = lastTool(calls[2]!);
  assert.match(read, /^seq 3 \(tool\), lines 199-203 of 400:\n/);
  assert.ok(read.includes(FORGOTTEN) && read.includes("log line 199: all fine"));
}

test("recall: runRecall searches, reads by lines, and answers a bad call with its reason", async () => {
  const ctx = client();
  const id = sessionId("recall");
  await seedForgotten(ctx, id);
  assert.match(await runRecall(ctx, id, JSON.stringify({ query: CODE })), /^1 messages match 'ZX-48151'.*\nseq 3 \(tool shell\) line 201: /s);
  assert.equal(await runRecall(ctx, id, { seq: 3, line_start: 201, line_end: 201 }), `seq 3 (tool), lines 201-201 of 400:\n${FORGOTTEN}\n`);
  assert.match(await runRecall(ctx, id, "checksum"), /seq 3 \(tool shell\) line 201/); // a bare query
  assert.equal(await runRecall(ctx, id, "{}"), NO_ARGUMENTS);
  assert.match(await runRecall(ctx, id, { seq: 9999 }), /^recall failed: /);
  assert.match(await runRecall(ctx, id, { query: "x".repeat(2000) }), /^recall failed: .*q/);
  assert.equal(await runRecall(ctx, id, { query: "?!" }), "No message of this conversation matches '?!'.");
});

test("recall with the AI SDK: the model gets back the output a trim left out", async () => {
  const ctx = client();
  const id = sessionId("recall-ai");
  await seedForgotten(ctx, id);
  const memory = new ContextdMemory({ sessionId: id, client: ctx, context: { max_tokens: BUDGET, recall: true } });
  const tools = { recall: memory.recallTool() };
  const provider = createOpenAICompatible({ name: "scripted", baseURL: model.baseUrl });
  const before = model.calls.length;
  const result = await generateText({
    model: provider("scripted"),
    tools,
    stopWhen: stepCountIs(5),
    prompt: `Recall ${CODE}`,
    prepareStep: memory.prepareStep,
    onStepFinish: memory.onStepFinish,
  });
  checkRun(model.calls.slice(before));
  assert.match(result.text, /^The file says: seq 3 \(tool\)/);
  const logged = (await ctx.allMessages(id)).filter((m) => m.role === "tool").map((m) => text(m.content));
  assert.ok(logged.at(-1)!.includes(FORGOTTEN), "the recall answers are in the log like any tool result");
});

test("recall with the Agents SDK: session.recallTool() fetches what the payload left out", async () => {
  const ctx = client();
  const id = sessionId("recall-agents");
  await seedForgotten(ctx, id);
  const session = new ContextdSession(id, { client: ctx, context: { max_tokens: BUDGET, recall: true } });
  const openai = new OpenAI({ baseURL: model.baseUrl, apiKey: "none", maxRetries: 0 });
  const agent = new Agent({
    name: "fixer",
    instructions: "You fix the build.",
    model: new OpenAIChatCompletionsModel(openai, "scripted"),
    tools: [session.recallTool()],
  });
  const before = model.calls.length;
  const result = await run(agent, `Recall ${CODE}`, { session, callModelInputFilter: session.callModelInputFilter });
  checkRun(model.calls.slice(before));
  assert.match(String(result.finalOutput), /^The file says: seq 3 \(tool\)/);
});

test("recall with LangGraph: recallTool() runs against the session", async () => {
  const ctx = client();
  const id = sessionId("recall-lc");
  await seedForgotten(ctx, id);
  const recall = recallTool(id, ctx);
  const history = new ContextdChatMessageHistory(id, { client: ctx, context: { max_tokens: BUDGET, recall: true } });
  const chat = new ChatOpenAI({ model: "scripted", apiKey: "none", configuration: { baseURL: model.baseUrl }, maxRetries: 0 });
  const agent = createReactAgent({ llm: chat, tools: [recall], ...contextdHooks(history) });
  const before = model.calls.length;
  const result = await agent.invoke({ messages: [new HumanMessage(`Recall ${CODE}`)] });
  checkRun(model.calls.slice(before));
  assert.match(String(result.messages.at(-1)!.content), /^The file says: seq 3 \(tool\)/);
});

test("recall with createAgent: contextdMiddleware({ recall: true }) gives the agent the tool", async () => {
  const ctx = client();
  const id = sessionId("recall-lc-agent");
  await seedForgotten(ctx, id);
  const chat = new ChatOpenAI({ model: "scripted", apiKey: "none", configuration: { baseURL: model.baseUrl }, maxRetries: 0 });
  const middleware = contextdMiddleware(id, { client: ctx, recall: true, context: { max_tokens: BUDGET } });
  const agent = createAgent({ model: chat, tools: [], middleware: [middleware] });
  const before = model.calls.length;
  const result = await agent.invoke({ messages: [new HumanMessage(`Recall ${CODE}`)] });
  checkRun(model.calls.slice(before));
  assert.match(String(result.messages.at(-1)!.content), /^The file says: seq 3 \(tool\)/);
  const logged = (await ctx.allMessages(id)).filter((m) => m.role === "tool").map((m) => text(m.content));
  assert.ok(logged.at(-1)!.includes(FORGOTTEN), "the recall answers are in the log like any tool result");
});

const headers = (output: string) => [...output.matchAll(/^seq (\d+) \(/gm)].map((m) => Number(m[1]));

test("recall: seqs reads a range, bounded, and says how to read on; other spellings and the old shapes too", async () => {
  const ctx = client();
  const id = sessionId("recall-range");
  const huge = Array.from({ length: 4000 }, (_, i) => `line ${i}: building\n`).join("");
  await ctx.append(id, Array.from({ length: 80 }, (_, i) => ({ role: "user" as const, content: i === 2 ? huge : `message ${i + 1}` })));
  const wide = await runRecall(ctx, id, { seqs: "1-80" });
  assert.deepEqual(headers(wide), Array.from({ length: RANGE_MAX_MESSAGES }, (_, i) => i + 1));
  assert.ok(wide.endsWith(`read on with seqs "${RANGE_MAX_MESSAGES + 1}-80"]`), wide.slice(-200));
  assert.match(wide, new RegExp(`seq 3 \\(user\\), first \\d+ of ${huge.length} characters:\n`));
  assert.ok(wide.includes("[cut: read it whole with seq 3, or line_start/line_end]"));
  assert.ok(wide.includes("seq 2 (user):\nmessage 2\n"), "short messages whole");
  const rest = await runRecall(ctx, id, JSON.stringify({ seqs: `[#${RANGE_MAX_MESSAGES + 1}-80]` }));
  assert.deepEqual(headers(rest), Array.from({ length: 80 - RANGE_MAX_MESSAGES }, (_, i) => i + RANGE_MAX_MESSAGES + 1));
  const few = await runRecall(ctx, id, { seqs: "5-7" });
  assert.equal(few, "seq 5 (user):\nmessage 5\nseq 6 (user):\nmessage 6\nseq 7 (user):\nmessage 7");
  for (const args of [{ from_seq: 5, to_seq: 7 }, { seq: 5, to_seq: 7 }, { seq: "5-7" }, { range: "#5-7" }]) {
    assert.equal(await runRecall(ctx, id, args), few, JSON.stringify(args));
  }
  assert.equal(await runRecall(ctx, id, { seq: 2 }), "seq 2 (user):\nmessage 2");
  assert.equal(await runRecall(ctx, id, { seq: 3, line_start: 2, line_end: 2 }), "seq 3 (user), lines 2-2 of 4000:\nline 1: building\n");
  assert.match(await runRecall(ctx, id, { seqs: "9-3" }), /^recall failed: .*seqs/);
  assert.equal(await runRecall(ctx, id, { seqs: "900-910" }), "No message of this conversation is in seqs 900-910 (its last seq is 80).");
});

test("recall: the adapters' tools take seqs", async () => {
  const ctx = client();
  const id = sessionId("recall-range-tools");
  await ctx.append(id, Array.from({ length: 5 }, (_, i) => ({ role: "user" as const, content: `message ${i + 1}` })));
  const want = await runRecall(ctx, id, { seqs: "2-3" });
  assert.deepEqual(headers(want), [2, 3]);
  const memory = new ContextdMemory({ sessionId: id, client: ctx });
  const execute = memory.recallTool().execute!;
  assert.equal(await execute({ seqs: "2-3" }, { toolCallId: "c1", messages: [] }), want);
  const lc = recallTool(id, ctx) as unknown as { invoke(input: Record<string, unknown>): Promise<unknown> };
  assert.equal(await lc.invoke({ seqs: "[#2-3]" }), want);
});

test("recall: the tool the payload offers is the client's, and reads a compaction summary's citations back", async () => {
  const ctx = client();
  const id = sessionId("recall-cite");
  const turns = Array.from({ length: 14 }, (_, i) => [
    { role: "user" as const, content: `question ${i}: what does line ${i} of notes.txt say? ${"context ".repeat(40)}` },
    { role: "assistant" as const, content: `line ${i} says item ${i}. ${"detail ".repeat(40)}` },
  ]).flat();
  await ctx.append(id, turns);
  const job = (await ctx.compact(id, { wait: true, force: true })) as { status: string };
  assert.ok(job.status === "success" || job.status === "degraded", JSON.stringify(job));
  const payload = await ctx.context(id, { recall: true });
  assert.deepEqual((payload.tools ?? []).find((t) => (t as { function?: { name?: string } }).function?.name === RECALL_TOOL_NAME), chatRecallTool());
  const summary = (payload.messages ?? []).map((m) => text((m as { content?: unknown }).content)).join("\n");
  const cited = [...summary.matchAll(/\[#([0-9,-]+)\]/g)].map((m) => m[1]!);
  assert.ok(cited.length, summary);
  const log = new Map((await ctx.allMessages(id)).map((m) => [m.seq, m]));
  for (const citation of cited) {
    const wanted = citation.split(",").flatMap((part) => {
      const [a, b] = part.split("-").map(Number);
      return Array.from({ length: (b ?? a!) - a! + 1 }, (_, i) => a! + i);
    });
    const output = await runRecall(ctx, id, { seqs: citation });
    assert.deepEqual(headers(output), wanted.slice(0, RANGE_MAX_MESSAGES), citation);
    for (const seq of wanted.slice(0, RANGE_MAX_MESSAGES)) assert.ok(output.includes(String(log.get(seq)!.content)), `${citation}: ${seq}`);
  }
});

test("a query is quoted as Python's repr quotes it, as the Python client's answers do", () => {
  // [text, repr(text)] from Python 3.11.
  const cases: [string, string][] = [
    ["zzz\nyyy", "'zzz\\nyyy'"],
    ["tab\there", "'tab\\there'"],
    ["it's", "\"it's\""],
    ['say "hi"', "'say \"hi\"'"],
    ["both ' and \"", "'both \\' and \"'"],
    ["back\\slash", "'back\\\\slash'"],
    ["nul\u0000x", "'nul\\x00x'"],
    ["\u007f", "'\\x7f'"],
    ["é中文", "'é中文'"],
    ["\u200b zero", "'\\u200b zero'"],
    ["\u2028line", "'\\u2028line'"],
    ["😀", "'😀'"],
  ];
  for (const [text, expected] of cases) assert.equal(pyRepr(text), expected, JSON.stringify(text));
});
