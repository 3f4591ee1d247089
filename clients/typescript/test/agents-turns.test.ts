import assert from "node:assert/strict";
import { before, test } from "node:test";
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";
import { ContextdSession } from "../src/agents.js";
import type { Message } from "../src/index.js";
import { ResponsesModel, last, type Answer, type Input } from "./support/responses-model.js";
import { client, sessionId } from "./support/server.js";

before(() => setTracingDisabled(true));

function reader(model: ResponsesModel, execute: (path: string) => Promise<string> | string = (p) => `first line of ${p}`): Agent {
  const readFile = tool({
    name: "read_file",
    description: "Read a file",
    parameters: z.object({ path: z.string() }),
    execute: async ({ path }) => execute(path),
  });
  return new Agent({ name: "reader", instructions: "You read files.", model: new OpenAIResponsesModel(model.openai(), "gpt-5"), tools: [readFile] });
}

/** A user's request to read a file is a call, after which the model says `answer`, as it does to anything else. */
const readsThenSays = (answer: string, withCall?: string) => (input: Input[]): Answer => {
  const seen = last(input);
  const file = /(\w+\.txt)/.exec(seen.text)?.[1];
  if (seen.kind === "user" && file) return { text: withCall, calls: [{ name: "read_file", args: { path: file } }] };
  return { text: answer };
};

const brief = (log: Message[]) =>
  log.map((m) => [m.role, m.tool_calls ? (m.tool_calls as { id: string }[]).map((c) => c.id).join(",") : m.content]);

test("Agents SDK: two runs on one session answer alike, and each run's answer is stored", async () => {
  const id = sessionId("agents-turns");
  const model = new ResponsesModel(readsThenSays("OK."));
  let release!: () => void;
  const bDone = new Promise<void>((r) => (release = r));
  const slow = reader(model, async (p) => {
    await bDone;
    return `first line of ${p}`;
  });
  const sessionA = new ContextdSession(id, { client: client() });
  const sessionB = new ContextdSession(id, { client: client() });
  const a = run(slow, "Please read notes.txt", { session: sessionA, callModelInputFilter: sessionA.callModelInputFilter });
  while (model.requests.length < 1) await new Promise((r) => setTimeout(r, 10)); // A is in its tool
  const b = await run(reader(model), "Hello from B", { session: sessionB, callModelInputFilter: sessionB.callModelInputFilter });
  assert.equal(b.finalOutput, "OK.");
  release();
  assert.equal((await a).finalOutput, "OK.");

  // B's "OK." was in A's last payload: it is contextd's, A's own answer is A's.
  assert.deepEqual(brief(await client().allMessages(id)), [
    ["user", "Please read notes.txt"],
    ["user", "Hello from B"],
    ["assistant", "OK."],
    ["assistant", "call_1_0"],
    ["tool", "first line of notes.txt"],
    ["assistant", "OK."],
  ]);
});

test("Agents SDK: what a failed run stored ahead does not swallow the next run's answer", async () => {
  const id = sessionId("agents-turns");
  const model = new ResponsesModel(readsThenSays("OK.", "OK."));
  model.fail(1); // the model call after the tool step
  const session = new ContextdSession(id, { client: client() });
  const agent = reader(model);
  await assert.rejects(run(agent, "Please read notes.txt", { session, callModelInputFilter: session.callModelInputFilter }));
  const again = await run(agent, "Thanks, that's all.", { session, callModelInputFilter: session.callModelInputFilter });
  assert.equal(again.finalOutput, "OK.");

  assert.deepEqual(brief(await client().allMessages(id)), [
    ["user", "Please read notes.txt"],
    ["assistant", "OK."],
    ["assistant", "call_1_0"],
    ["tool", "first line of notes.txt"],
    ["user", "Thanks, that's all."],
    ["assistant", "OK."],
  ]);
  const items = await session.getItems();
  assert.equal((items.at(-1) as { role?: string }).role, "assistant");
});

test("Agents SDK on a reasoning model: payload items go without provider item ids, call ids kept", async () => {
  const id = sessionId("agents-turns");
  const model = new ResponsesModel((input) => {
    const seen = last(input);
    return seen.kind === "tool" ? { text: `The file says: ${seen.text}` } : readsThenSays("")(input);
  });
  model.reasoning = true;
  const session = new ContextdSession(id, { client: client() });
  const agent = reader(model);
  for (const prompt of ["Please read notes.txt", "Now read todo.txt"]) {
    const result = await run(agent, prompt, { session, callModelInputFilter: session.callModelInputFilter });
    assert.match(String(result.finalOutput), /^The file says: first line of /);
  }
  assert.equal(model.requests.length, 4);
  for (const [i, { input }] of model.requests.entries()) {
    // The reasoning items stay out of payloads: an fc_/msg_ id without its reasoning item is a 400 at OpenAI.
    assert.ok(!input.some((item) => item.type === "reasoning"), `request ${i}`);
    assert.deepEqual(input.filter((item) => "id" in item), [], `request ${i}: no item ids`);
  }
  const calls = model.requests[3]!.input.filter((item) => item.type === "function_call").map((item) => item.call_id);
  const outputs = model.requests[3]!.input.filter((item) => item.type === "function_call_output").map((item) => item.call_id);
  assert.deepEqual(calls, ["call_1_0", "call_3_0"]);
  assert.deepEqual(outputs, calls);

  // The log keeps every reasoning item, out of context, with its encrypted content.
  const log = await client().allMessages(id);
  const reasoning = log.filter((m) => m.include_in_context === false);
  assert.equal(reasoning.length, 4);
  assert.deepEqual(
    reasoning.map((m) => JSON.stringify(m.metadata).match(/enc_\d/)?.[0]),
    ["enc_1", "enc_2", "enc_3", "enc_4"],
  );
  assert.equal(log.filter((m) => m.role === "user").length, 2);
  assert.equal(log.filter((m) => m.role === "tool").length, 2);
});

test("Agents SDK: a tool output is stored once, without a verbatim copy, and read back named after its call", async () => {
  const id = sessionId("agents-turns");
  const model = new ResponsesModel((input) => {
    const seen = last(input);
    return seen.kind === "tool" ? { text: "Read it." } : readsThenSays("")(input);
  });
  const big = `first line of big.txt\n${"x".repeat(1_200_000)}`; // 2.4 MB with a copy: over the 2 MB per-message limit
  const session = new ContextdSession(id, { client: client(), context: { preview_limit_tokens: 200 } });
  const result = await run(reader(model, () => big), "Please read big.txt", { session, callModelInputFilter: session.callModelInputFilter });
  assert.equal(result.finalOutput, "Read it.");

  const log = await client().allMessages(id);
  assert.deepEqual(log.map((m) => m.role), ["user", "assistant", "tool", "assistant"]);
  assert.equal(log[2]!.content, big);
  assert.equal(log[2]!.metadata ?? null, null, "no copy of the output in the metadata");
  const expected = { type: "function_call_result", callId: "call_1_0", name: "read_file", status: "completed", output: { type: "text", text: big } };
  assert.deepEqual((await session.getItems())[2], expected);
  // A tail read that leaves its call out looks the call up: the name is still the call's.
  const tail = await new ContextdSession(id, { client: client() }).getItems(2);
  assert.deepEqual(tail[0], expected);
});

test("Agents SDK: a failed run is continued with no new input, and its input is stored once", async () => {
  const id = sessionId("agents-turns");
  const model = new ResponsesModel((input) => {
    const seen = last(input);
    return seen.kind === "tool" ? { text: `The file says: ${seen.text}` } : readsThenSays("")(input);
  });
  model.fail(1);
  const session = new ContextdSession(id, { client: client() });
  const agent = reader(model);
  await assert.rejects(run(agent, "Please read notes.txt", { session, callModelInputFilter: session.callModelInputFilter }));
  const continued = await run(agent, [], { session, callModelInputFilter: session.callModelInputFilter });
  assert.equal(continued.finalOutput, "The file says: first line of notes.txt");
  assert.deepEqual(brief(await client().allMessages(id)), [
    ["user", "Please read notes.txt"],
    ["assistant", "call_1_0"],
    ["tool", "first line of notes.txt"],
    ["assistant", "The file says: first line of notes.txt"],
  ]);
});
