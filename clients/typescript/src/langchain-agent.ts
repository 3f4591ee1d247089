/**
 * contextd for LangChain.js v1 agents (`createAgent` from `langchain`, an optional peer
 * dependency): `contextdMiddleware(sessionId)`.
 *
 * Before every model call (`beforeModel`) it stores what the agent added since the last
 * call (the user's input, the model's tool calls, their results) and replaces the
 * agent's messages with contextd's payload: the model reads a history fitted to its
 * window, and the graph state stays small however long the run. When the agent ends
 * (`afterAgent`) its final answer is stored too.
 *
 *     const agent = createAgent({ model, tools, middleware: [contextdMiddleware("user-42")] });
 *     await agent.invoke({ messages: [{ role: "user", content: "Hi!" }] });
 *
 * Messages keep their LangGraph ids as contextd ids, so one sent twice (a retried
 * append, a replayed thread) is stored once. Put the system prompt and tools in the
 * session (`client.putSession`) so contextd budgets for them, and leave `createAgent`'s
 * `systemPrompt` unset. With `recall: true` the middleware gives the agent contextd's
 * recall tool and asks for payloads that say what they leave out.
 *
 * On Anthropic models add `anthropicPromptCachingMiddleware()` after this one: it marks
 * the payload's end as a cache breakpoint, and contextd keeps the payload's head the
 * same from call to call, so the next call reads it from the cache.
 */
import type { BaseMessage } from "@langchain/core/messages";
import { RemoveMessage } from "@langchain/core/messages";
import { REMOVE_ALL_MESSAGES } from "@langchain/langgraph";
import { createMiddleware } from "langchain";
import { ContextdClient } from "./client.js";
import { ContextdChatMessageHistory, recallTool } from "./langchain.js";
import type { ContextOptions } from "./types.js";

/** The ids of payload messages in the graph state: they are contextd's, never stored again. */
export const PAYLOAD_ID_PREFIX = "contextd-payload-";

export type ContextdMiddlewareOptions = {
  client?: ContextdClient;
  lockToken?: string;
  /** Offer contextd's recall tool, and ask for payloads with the note on what they leave out. */
  recall?: boolean;
  /** Passed to every context call: `max_tokens`, `strategy`, `system`, `tools`, ... */
  context?: Omit<ContextOptions, "format">;
};

export function contextdMiddleware(sessionId: string, options: ContextdMiddlewareOptions = {}) {
  const client = options.client ?? new ContextdClient();
  const history = new ContextdChatMessageHistory(sessionId, {
    client,
    ...(options.lockToken ? { lockToken: options.lockToken } : {}),
    context: { ...options.context, ...(options.recall ? { recall: true } : {}) },
  });
  const store = (messages: readonly BaseMessage[]) =>
    history.addMessages(messages.filter((m) => !(m.id ?? "").startsWith(PAYLOAD_ID_PREFIX)));
  return createMiddleware({
    name: "ContextdMiddleware",
    tools: options.recall ? [recallTool(sessionId, client)] : [],
    beforeModel: async (state) => {
      await store(state.messages);
      const messages = await history.payload(PAYLOAD_ID_PREFIX);
      return { messages: [new RemoveMessage({ id: REMOVE_ALL_MESSAGES }), ...messages] };
    },
    afterAgent: async (state) => {
      await store(state.messages);
      return undefined;
    },
  });
}
