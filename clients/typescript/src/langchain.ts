/**
 * contextd for LangChain.js (`@langchain/core`, an optional peer dependency).
 *
 * - `ContextdChatMessageHistory`: a `BaseListChatMessageHistory` on a contextd session,
 *   for `RunnableWithMessageHistory` and anything else that takes a chat history.
 *   `getMessages()` gives back exactly the messages it was given; with
 *   `{ fitted: true }` it gives contextd's payload instead (fitted to the window,
 *   compacted turns as a summary), so a chain's model reads that.
 * - `contextdHooks(history)`: `preModelHook` and `postModelHook` for LangGraph's
 *   `createReactAgent`. Before every model call the agent's new messages (the user's
 *   input, tool results) are stored and the model reads contextd's payload
 *   (`llmInputMessages`; the graph state is left as it is); after it, the model's
 *   message is stored. Messages keep their LangGraph ids as contextd ids, so one sent
 *   twice is stored once.
 *
 * - `recallTool(sessionId, client)`: the recall tool as a LangChain tool, run against
 *   the session; with `context: { recall: true }` the payloads say what they leave out
 *   and the model fetches it back (recall.ts).
 *
 * Messages are stored as OpenAI chat messages (what contextd assembles payloads
 * from), with the LangChain message itself in `metadata.langchain`.
 */
import { BaseListChatMessageHistory } from "@langchain/core/chat_history";
import {
  AIMessage,
  type BaseMessage,
  HumanMessage,
  SystemMessage,
  ToolMessage,
  mapChatMessagesToStoredMessages,
  mapStoredMessagesToChatMessages,
  type StoredMessage,
} from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ContextdClient } from "./client.js";
import { NotFound } from "./errors.js";
import { RECALL_DESCRIPTION, RECALL_PARAMETERS, RECALL_TOOL_NAME, runRecall } from "./recall.js";
import type { ChatMessage, ContextOptions, Message } from "./types.js";

export const LC_KEY = "langchain";

type Chat = {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; function: { name: string; arguments: string } }[] | null;
  tool_call_id?: string;
  name?: string;
};

export type ContextdHistoryOptions = {
  client?: ContextdClient;
  lockToken?: string;
  /** `getMessages()` returns contextd's fitted payload instead of the log. */
  fitted?: boolean;
  /** Passed to every context call: `max_tokens`, `strategy`, `system`, `tools`, ... */
  context?: Omit<ContextOptions, "format">;
};

export class ContextdChatMessageHistory extends BaseListChatMessageHistory {
  lc_namespace = ["contextd", "langchain"];
  readonly client: ContextdClient;

  constructor(
    readonly sessionId: string,
    private readonly options: ContextdHistoryOptions = {},
  ) {
    super();
    this.client = options.client ?? new ContextdClient();
  }

  async getMessages(): Promise<BaseMessage[]> {
    try {
      if (this.options.fitted) return await this.payload();
      return fromStored(await this.client.allMessages(this.sessionId));
    } catch (error) {
      if (error instanceof NotFound) return []; // no session yet: nothing said so far
      throw error;
    }
  }

  /**
   * contextd's fitted payload for the next model call, as LangChain messages (with
   * `idPrefix`, ids `${idPrefix}0`, `${idPrefix}1`, ...).
   */
  async payload(idPrefix?: string): Promise<BaseMessage[]> {
    const context = await this.client.context(this.sessionId, this.options.context ?? {});
    return fromChat((context.messages ?? []) as Chat[], idPrefix);
  }

  async addMessage(message: BaseMessage): Promise<void> {
    await this.addMessages([message]);
  }

  /** One atomic append; a message's LangChain `id` is its contextd id. */
  override async addMessages(messages: BaseMessage[]): Promise<void> {
    if (!messages.length) return;
    const opts = this.options.lockToken ? { lockToken: this.options.lockToken } : {};
    await this.client.append(this.sessionId, messages.map(toStored), opts);
  }

  /** Empty the log; the session's settings (system prompt, tools) stay. */
  override async clear(): Promise<void> {
    try {
      await this.client.clear(this.sessionId, this.options.lockToken ? { lockToken: this.options.lockToken } : {});
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
    }
  }
}

/**
 * `preModelHook` and `postModelHook` for LangGraph's `createReactAgent`: put the
 * system prompt and tools in the session (`client.putSession`) so contextd budgets
 * for them, and leave the agent's `prompt` unset.
 */
export function contextdHooks(history: ContextdChatMessageHistory): {
  preModelHook: (state: { messages: BaseMessage[] }) => Promise<{ llmInputMessages: BaseMessage[] }>;
  postModelHook: (state: { messages: BaseMessage[] }) => Promise<Record<string, never>>;
} {
  const stored = new Set<string>();
  const store = async (messages: BaseMessage[]) => {
    const fresh = messages.filter((m) => !m.id || !stored.has(m.id));
    await history.addMessages(fresh);
    for (const m of fresh) if (m.id) stored.add(m.id);
  };
  return {
    preModelHook: async (state) => {
      await store(state.messages);
      return { llmInputMessages: await history.payload() };
    },
    postModelHook: async (state) => {
      await store(state.messages);
      return {};
    },
  };
}

/** The chat message contextd stores for a LangChain message, with the message itself in metadata. */
export function toStored(message: BaseMessage): ChatMessage {
  const chat = toChat(message);
  const lc = JSON.parse(JSON.stringify(mapChatMessagesToStoredMessages([message])[0])) as StoredMessage;
  if (JSON.stringify(lc.data.content) === JSON.stringify(chat.content)) delete (lc.data as { content?: unknown }).content;
  const out: Record<string, unknown> = { ...chat, metadata: { [LC_KEY]: lc } };
  if (message.id) out.id = message.id; // stored once however often it is sent
  return out as ChatMessage;
}

function toChat(message: BaseMessage): Chat {
  const type = message.getType();
  if (type === "human") return { role: "user", content: message.content };
  if (type === "system") return { role: "system", content: message.content };
  if (type === "tool") return { role: "tool", tool_call_id: (message as ToolMessage).tool_call_id, content: textOf(message.content) };
  const calls = (message as AIMessage).tool_calls ?? [];
  const text = textOf(message.content);
  const chat: Chat = { role: "assistant", content: text || (calls.length ? null : "") };
  if (calls.length) {
    chat.tool_calls = calls.map((c) => ({ id: c.id ?? "", type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } }));
  }
  return chat;
}

/**
 * LangChain messages for chat messages (a contextd payload). With `idPrefix`, message
 * `i` gets the id `${idPrefix}${i}` (set at construction, so a checkpointer keeps it).
 */
export function fromChat(messages: readonly Chat[], idPrefix?: string): BaseMessage[] {
  return messages.map((m, i) => {
    const id = idPrefix === undefined ? {} : { id: `${idPrefix}${i}` };
    if (m.role === "system") return new SystemMessage({ content: textOf(m.content), ...id });
    if (m.role === "user") return new HumanMessage({ content: (m.content ?? "") as string, ...id });
    if (m.role === "tool") return new ToolMessage({ content: textOf(m.content), tool_call_id: String(m.tool_call_id ?? ""), ...id });
    const tool_calls = (m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, args: parseArgs(c.function.arguments), type: "tool_call" as const }));
    return new AIMessage({ content: m.content === null || m.content === undefined ? "" : textOf(m.content), tool_calls, ...id });
  });
}

/** The LangChain messages stored messages stand for. */
export function fromStored(messages: readonly Message[]): BaseMessage[] {
  return messages.map((m) => {
    const lc = (m.metadata ?? {})[LC_KEY] as StoredMessage | undefined;
    if (lc && typeof lc === "object" && lc.data) {
      const data = { ...lc.data, content: lc.data.content ?? m.content } as StoredMessage["data"];
      return mapStoredMessagesToChatMessages([{ type: lc.type, data }])[0]!;
    }
    return fromChat([m as unknown as Chat])[0]!;
  });
}

function parseArgs(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || "{}");
    return value && typeof value === "object" ? (value as Record<string, unknown>) : { input: value };
  } catch {
    return { input: text };
  }
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: unknown }) => (typeof p?.text === "string" ? p.text : "")).join("");
  return content === null || content === undefined ? "" : JSON.stringify(content);
}

/**
 * The recall tool as a LangChain tool, run against `sessionId`: give it to the agent
 * (`createReactAgent({ llm, tools: [...tools, recallTool(sid, client)], ... })`) and ask
 * for payloads with `context: { recall: true }`.
 */
export function recallTool(sessionId: string, client: ContextdClient = new ContextdClient()) {
  return tool((input: Record<string, unknown>) => runRecall(client, sessionId, input), {
    name: RECALL_TOOL_NAME,
    description: RECALL_DESCRIPTION,
    schema: { ...RECALL_PARAMETERS, properties: { ...RECALL_PARAMETERS.properties } },
  });
}
