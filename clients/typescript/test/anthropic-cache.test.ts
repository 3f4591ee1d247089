import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { createAnthropic } from "@ai-sdk/anthropic";
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage } from "@langchain/core/messages";
import { generateText, type ModelMessage } from "ai";
import { anthropicPromptCachingMiddleware, createAgent } from "langchain";
import { ContextdMemory, markCacheBreakpoints } from "../src/ai.js";
import { contextdMiddleware } from "../src/langchain-agent.js";
import { client, sessionId } from "./support/server.js";

/** Anthropic's Messages API as far as one answer goes: keeps each request's body. */
class FakeAnthropic {
  readonly bodies: Record<string, unknown>[] = [];
  private server: Server | undefined;
  baseUrl = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        this.bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>);
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id: "msg_1", type: "message", role: "assistant", model: "claude-test",
          content: [{ type: "text", text: "Done." }], stop_reason: "end_turn", stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 2 },
        }));
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

const anthropic = new FakeAnthropic();
before(() => anthropic.start());
after(() => anthropic.stop());

type Block = { type: string; text?: string; cache_control?: unknown };
type Sent = { system?: Block[]; messages: { role: string; content: Block[] }[] };

function marked(messages: ModelMessage[]): number[] {
  return messages.flatMap((m, i) => ((m.providerOptions as { anthropic?: { cacheControl?: unknown } } | undefined)?.anthropic?.cacheControl ? [i] : []));
}

test("breakpoints: the system prompt, the system's end, the stable prefix's end, the last message", () => {
  const messages: ModelMessage[] = [
    { role: "system", content: "You read files." },
    { role: "system", content: "Summary of the conversation so far: ..." },
    { role: "user", content: "read a" },
    { role: "assistant", content: "A says hi." },
    { role: "user", content: "and b?", providerOptions: { other: { keep: true } } },
  ];
  assert.deepEqual(marked(markCacheBreakpoints(messages, 4)), [0, 1, 3, 4]);
  assert.deepEqual(messages[4]!.providerOptions, { other: { keep: true }, anthropic: { cacheControl: { type: "ephemeral" } } });
  const plain: ModelMessage[] = [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }];
  assert.deepEqual(marked(markCacheBreakpoints(plain, 0)), [1]);
  assert.deepEqual(markCacheBreakpoints([], 3), []);
});

test("AI SDK on Anthropic: contextd's payload reaches the API with its cache breakpoints", async () => {
  const ctx = client();
  const id = sessionId("anthropic");
  await ctx.putSession(id, { system_prompt: "You read files." });
  await ctx.append(id, [
    { role: "user", content: "hi" },
    { role: "assistant", content: "Hello." },
  ]);
  const memory = new ContextdMemory({ sessionId: id, client: ctx });
  const provider = createAnthropic({ baseURL: anthropic.baseUrl, apiKey: "test" });
  const result = await generateText({
    model: provider("claude-test"),
    prompt: "What now?",
    prepareStep: memory.prepareStep,
    onStepFinish: memory.onStepFinish,
  });
  assert.equal(result.text, "Done.");
  const sent = anthropic.bodies.at(-1) as unknown as Sent;
  assert.deepEqual(sent.system?.map((b) => [b.text, Boolean(b.cache_control)]), [["You read files.", true]]);
  const blocks = sent.messages.flatMap((m) => m.content);
  assert.deepEqual(sent.messages.map((m) => m.role), ["user", "assistant", "user"]);
  // The stable prefix ends before the newest step (the new user message), the payload after it.
  assert.deepEqual(blocks.map((b) => [b.text, Boolean(b.cache_control)]), [["hi", false], ["Hello.", true], ["What now?", true]]);
  // The provider drops breakpoints it cannot place (a fifth, an unsupported part) with a warning.
  assert.deepEqual((result.warnings ?? []).filter((w) => JSON.stringify(w).includes("cache")), []);

  const withoutMarks = new ContextdMemory({ sessionId: id, client: ctx, cacheControl: false });
  assert.deepEqual(marked(await withoutMarks.messages()), []);
});

test("LangChain.js on Anthropic: langchain's prompt-caching middleware after contextd's marks the payload", async () => {
  const ctx = client();
  const id = sessionId("anthropic-lc");
  await ctx.putSession(id, { system_prompt: "You read files." });
  await ctx.append(id, [
    { role: "user", content: "hi" },
    { role: "assistant", content: "Hello." },
  ]);
  const model = new ChatAnthropic({ model: "claude-test", apiKey: "test", anthropicApiUrl: anthropic.baseUrl.replace(/\/v1$/, ""), maxRetries: 0 });
  const agent = createAgent({ model, tools: [], middleware: [contextdMiddleware(id, { client: ctx }), anthropicPromptCachingMiddleware()] });
  const result = await agent.invoke({ messages: [new HumanMessage("What now?")] });
  assert.equal(result.messages.at(-1)!.content, "Done.");
  const sent = anthropic.bodies.at(-1) as unknown as Sent & { cache_control?: unknown };
  // A top-level breakpoint: Anthropic puts it on the last block, the payload's end.
  assert.deepEqual(sent.cache_control, { type: "ephemeral", ttl: "5m" });
  const system = typeof sent.system === "string" ? sent.system : sent.system?.map((b) => b.text).join("");
  assert.equal(system, "You read files.");
  assert.deepEqual(sent.messages.map((m) => m.role), ["user", "assistant", "user"]);
  const texts = sent.messages.map((m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text).join("")));
  assert.deepEqual(texts, ["hi", "Hello.", "What now?"]);
  const log = await ctx.allMessages(id);
  assert.deepEqual(log.map((m) => [m.role, m.content]), [["user", "hi"], ["assistant", "Hello."], ["user", "What now?"], ["assistant", "Done."]]);
});
