/**
 * A tool-using Vercel AI SDK agent whose history lives in contextd.
 *
 *     contextd serve &                      # or CONTEXTD_URL=... for another server
 *     npm run example:ai
 *
 * With no OPENAI_BASE_URL the model is a scripted OpenAI-compatible server started
 * here (no API key needed); set OPENAI_BASE_URL, OPENAI_API_KEY and MODEL for a real one.
 */
import { randomUUID } from "node:crypto";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";
import { ContextdClient } from "../src/index.js";
import { ContextdMemory } from "../src/ai.js";
import { startModel } from "./scripted-model.js";

const FILES: Record<string, string> = { "notes.txt": "Ship the TypeScript client on Friday.\nThen rest." };

const tools = {
  read_file: tool({
    description: "Read a file of the workspace",
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }) => FILES[path] ?? `no such file: ${path}`,
  }),
};

const model = await startModel();
try {
  const contextd = new ContextdClient(); // $CONTEXTD_URL, else http://127.0.0.1:8080
  const sessionId = `example-ai-${randomUUID()}`;
  await contextd.putSession(sessionId, { system_prompt: "You are a helpful assistant with a file reader." });
  const memory = new ContextdMemory({ sessionId, client: contextd, tools });
  const provider = createOpenAICompatible({ name: "model", baseURL: model.baseUrl, apiKey: model.apiKey });

  const result = await generateText({
    model: provider(model.name),
    tools,
    stopWhen: stepCountIs(8),
    prompt: "What does notes.txt say?",
    prepareStep: memory.prepareStep, // the model reads contextd's fitted payload
    onStepFinish: memory.onStepFinish, // each step's messages are appended as one batch
  });
  console.log(`answer: ${result.text}`);
  for (const m of await contextd.allMessages(sessionId)) {
    console.log(`  #${m.seq} ${m.role}: ${JSON.stringify(m.content ?? m.tool_calls)}`);
  }
} finally {
  await model.stop();
}
