/**
 * A tool-using OpenAI Agents SDK (JS) agent whose session lives in contextd.
 *
 *     contextd serve &                      # or CONTEXTD_URL=... for another server
 *     npm run example:agents
 *
 * With no OPENAI_BASE_URL the model is a scripted OpenAI-compatible server started
 * here (no API key needed); set OPENAI_BASE_URL, OPENAI_API_KEY and MODEL for a real one.
 */
import { randomUUID } from "node:crypto";
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";
import { ContextdClient } from "../src/index.js";
import { ContextdSession } from "../src/agents.js";
import { startModel } from "./scripted-model.js";

const FILES: Record<string, string> = { "notes.txt": "Ship the TypeScript client on Friday.\nThen rest." };

const readFile = tool({
  name: "read_file",
  description: "Read a file of the workspace",
  parameters: z.object({ path: z.string() }),
  execute: async ({ path }) => FILES[path] ?? `no such file: ${path}`,
});

setTracingDisabled(true); // no tracing export: nothing leaves this machine
const model = await startModel();
try {
  const contextd = new ContextdClient();
  const session = new ContextdSession(`example-agents-${randomUUID()}`, { client: contextd });
  const agent = new Agent({
    name: "reader",
    instructions: "You are a helpful assistant with a file reader.",
    model: new OpenAIChatCompletionsModel(new OpenAI({ baseURL: model.baseUrl, apiKey: model.apiKey }), model.name),
    tools: [readFile],
  });
  const result = await run(agent, "What does notes.txt say?", {
    session,
    callModelInputFilter: session.callModelInputFilter, // the model reads contextd's fitted payload
  });
  console.log(`answer: ${String(result.finalOutput)}`);
  for (const m of await contextd.allMessages(session.sessionId)) {
    console.log(`  #${m.seq} ${m.role}: ${JSON.stringify(m.content ?? m.tool_calls)}`);
  }
} finally {
  await model.stop();
}
