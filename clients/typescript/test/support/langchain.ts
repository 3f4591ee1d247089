/** What the LangChain.js tests share: a chat model on the scripted model, and a tool. */
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";
import type { ScriptedModel } from "../../examples/scripted-model.js";

export const chatOn = (model: ScriptedModel) =>
  new ChatOpenAI({ model: "scripted", apiKey: "none", configuration: { baseURL: model.baseUrl }, maxRetries: 0 });

export const readFile = tool(async ({ path }) => `first line of ${path}\nsecond line`, {
  name: "read_file",
  description: "Read a file",
  schema: z.object({ path: z.string() }),
});
