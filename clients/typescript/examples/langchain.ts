/**
 * A tool-using LangChain v1 agent (createAgent) whose history lives in contextd.
 *
 *     contextd serve &                      # or CONTEXTD_URL=... for another server
 *     npm run example:langchain
 *
 * With no OPENAI_BASE_URL the model is a scripted OpenAI-compatible server started
 * here (no API key needed); set OPENAI_BASE_URL, OPENAI_API_KEY and MODEL for a real one.
 */
import { randomUUID } from "node:crypto";
import { HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { createAgent } from "langchain";
import { z } from "zod";
import { ContextdClient } from "../src/index.js";
import { contextdMiddleware } from "../src/langchain-agent.js";
import { startModel } from "./scripted-model.js";

const FILES: Record<string, string> = { "notes.txt": "Ship the TypeScript client on Friday.\nThen rest." };

const readFile = tool(async ({ path }) => FILES[path] ?? `no such file: ${path}`, {
  name: "read_file",
  description: "Read a file of the workspace",
  schema: z.object({ path: z.string() }),
});

const model = await startModel();
try {
  const contextd = new ContextdClient();
  const sessionId = `example-langchain-${randomUUID()}`;
  // The system prompt lives in the session, so contextd budgets for it.
  await contextd.putSession(sessionId, { system_prompt: "You are a helpful assistant with a file reader." });
  const agent = createAgent({
    model: new ChatOpenAI({ model: model.name, apiKey: model.apiKey, configuration: { baseURL: model.baseUrl } }),
    tools: [readFile],
    middleware: [contextdMiddleware(sessionId, { client: contextd })], // store each step, feed the model contextd's payload
  });
  const result = await agent.invoke({ messages: [new HumanMessage("What does notes.txt say?")] });
  console.log(`answer: ${String(result.messages[result.messages.length - 1]?.content)}`);
  for (const m of await contextd.allMessages(sessionId)) {
    console.log(`  #${m.seq} ${m.role}: ${JSON.stringify(m.content ?? m.tool_calls)}`);
  }
} finally {
  await model.stop();
}
