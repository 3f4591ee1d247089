/**
 * contextd as the memory of a Vercel AI SDK agent (`ai` v5, an optional peer dependency).
 *
 *     import { generateText, stepCountIs } from "ai";
 *     import { ContextdMemory } from "contextd-client/ai";
 *
 *     const memory = new ContextdMemory({ sessionId: "user-42", tools });
 *     const result = await generateText({
 *       model, tools, stopWhen: stepCountIs(8),
 *       prompt: "What does notes.txt say?",   // only what is new: the log is in contextd
 *       prepareStep: memory.prepareStep,
 *       onStepFinish: memory.onStepFinish,
 *     });
 *
 * With `context: { recall: true }` and `tools: { ...tools, recall: memory.recallTool() }`
 * (in the memory's `tools` too) the model can search and read back what the payloads
 * left out (recall.ts).
 *
 * Before every step (`prepareStep`) the model's messages are replaced by contextd's
 * fitted payload as `ModelMessage[]` (system block, summary of compacted turns,
 * history with tool calls and their results, large outputs as previews); before the
 * first step the call's own input is stored. After every step (`onStepFinish`) the
 * messages the SDK produced for it (`response.messages`, the assistant's text and tool
 * calls, then the tool results) are appended as one batch. The same two hooks go into
 * `streamText` and the `Agent` class's settings.
 *
 * On Anthropic the payload carries contextd's prompt-cache breakpoints
 * (`markCacheBreakpoints`, `providerOptions.anthropic.cacheControl`; `cacheControl:
 * false` leaves them out).
 *
 * Messages are stored as OpenAI chat messages (what contextd assembles payloads from);
 * when that would lose something (reasoning, JSON tool output, files) the AI SDK
 * message itself is kept in `metadata.ai_sdk`, and `history()` gives it back.
 *
 * One memory follows one running call at a time: it counts the messages of the call
 * it already stored. Start a memory per concurrent run (they may share a session
 * only under a lease: `lockToken`).
 */
import { asSchema, jsonSchema, tool, type ModelMessage, type Tool, type ToolSet } from "ai";
import { ContextdClient } from "./client.js";
import { NotFound } from "./errors.js";
import { RECALL_DESCRIPTION, RECALL_PARAMETERS, runRecall, type RecallArguments } from "./recall.js";
import type { AppendResult, ChatMessage, ContextOptions, Message } from "./types.js";

export const AI_SDK_KEY = "ai_sdk";
/**
 * On the second and later tool messages of one AI SDK tool message (parallel results)
 * stored without a copy: read back as parts of the tool message before it.
 */
export const AI_SDK_MORE = "ai_sdk_more";

type Json = Record<string, unknown>;
type ChatToolCall = { id: string; type: "function"; function: { name: string; arguments: string } };
type Chat = { role: string; content?: unknown; tool_calls?: ChatToolCall[] | null; tool_call_id?: string; name?: string };

export type ContextdMemoryOptions = {
  sessionId: string;
  client?: ContextdClient;
  /** The lease's token, when the session is written under one. */
  lockToken?: string;
  /** A per-call system block; without it the session's stored `system_prompt` applies. */
  system?: string;
  /** The agent's tools, so contextd budgets for their schemas. */
  tools?: ToolSet;
  /** Passed to every context call: `max_tokens`, `strategy`, `reserve_output_tokens`, ... */
  context?: Omit<ContextOptions, "system" | "tools" | "format">;
  /** Store the call's input before the first step (default true); false when the caller appends it. */
  storeInput?: boolean;
  /**
   * Mark Anthropic's cache breakpoints on the payload (default true; other providers
   * ignore `providerOptions.anthropic`): see `markCacheBreakpoints`.
   */
  cacheControl?: boolean;
};

export class ContextdMemory {
  readonly sessionId: string;
  readonly client: ContextdClient;
  private readonly options: ContextdMemoryOptions;
  private stored = 0; // response messages of the running call already appended
  private readonly callNames = new Map<string, string>(); // the calls appended: id -> tool name

  constructor(options: ContextdMemoryOptions) {
    this.options = options;
    this.sessionId = options.sessionId;
    this.client = options.client ?? new ContextdClient();
  }

  /** For `prepareStep`: store the call's input (first step), then give the model contextd's payload. */
  // Typed by the fields they read, so they fit `prepareStep`/`onStepFinish` of any tool set.
  readonly prepareStep = async ({ stepNumber, messages }: { stepNumber: number; messages: readonly ModelMessage[] }): Promise<{ messages: ModelMessage[] }> => {
    if (stepNumber === 0) {
      this.stored = 0;
      if (this.options.storeInput ?? true) {
        // System messages of the call belong in the session settings or `system`.
        await this.append(messages.filter((m) => m.role !== "system"));
      }
    }
    return { messages: await this.messages() };
  };

  /** For `onStepFinish`: append the step's messages (`response.messages` since the last step) as one batch. */
  readonly onStepFinish = async (step: { response: { messages: readonly ModelMessage[] } }): Promise<void> => {
    const all = step.response.messages;
    const fresh = all.slice(this.stored);
    this.stored = all.length;
    await this.append(fresh);
  };

  /** Append AI SDK messages to the log (one atomic batch; ids fixed before the first attempt). */
  async append(messages: readonly ModelMessage[]): Promise<AppendResult | undefined> {
    if (messages.length === 0) return undefined;
    const opts = this.options.lockToken ? { lockToken: this.options.lockToken } : {};
    return this.client.append(this.sessionId, toStored(messages, this.callNames), opts);
  }

  /** contextd's fitted payload for the next model call, as `ModelMessage[]`. */
  async messages(): Promise<ModelMessage[]> {
    const tools = this.options.tools ? toolSchemas(this.options.tools) : undefined;
    const payload = await this.client.context(this.sessionId, {
      ...this.options.context,
      system: this.options.system,
      tools: tools && tools.length ? tools : undefined,
    });
    const chat = (payload.messages ?? []) as Chat[];
    const messages = fromChat(chat);
    if (this.options.cacheControl === false) return messages;
    const shared = payload.usage?.stable_prefix_messages ?? 0;
    return markCacheBreakpoints(messages, shared > 0 ? shared : defaultStablePrefix(chat));
  }

  /**
   * The recall tool, run against this session: `tools: { ...tools, recall: memory.recallTool() }`.
   * Its answers are tool results like any other, logged by `onStepFinish`.
   */
  recallTool(): Tool<RecallArguments, string> {
    return tool({
      description: RECALL_DESCRIPTION,
      inputSchema: jsonSchema<RecallArguments>(RECALL_PARAMETERS as unknown as Parameters<typeof jsonSchema>[0]),
      execute: (input: RecallArguments) => runRecall(this.client, this.sessionId, input),
    });
  }

  /** The whole log as AI SDK messages, oldest first (UI-only records included). */
  async history(): Promise<ModelMessage[]> {
    try {
      return fromStored(await this.client.allMessages(this.sessionId));
    } catch (error) {
      if (error instanceof NotFound) return [];
      throw error;
    }
  }

  /** Empty the log; the session's settings stay. */
  async clear(): Promise<void> {
    try {
      await this.client.clear(this.sessionId, this.options.lockToken ? { lockToken: this.options.lockToken } : {});
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
    }
  }
}

/** The agent's tools as chat `tools` (JSON Schema), for budgeting. */
export function toolSchemas(tools: ToolSet): Json[] {
  return Object.entries(tools).map(([name, tool]) => {
    const t = tool as { description?: string; inputSchema?: unknown };
    const schema = t.inputSchema ? asSchema(t.inputSchema as Parameters<typeof asSchema>[0]).jsonSchema : { type: "object" };
    return { type: "function", function: { name, description: t.description ?? "", parameters: schema } };
  });
}

// AI SDK -> chat -------------------------------------------------------------------

/**
 * The chat messages (with contextd metadata) contextd stores for AI SDK messages. The
 * original rides along in `metadata.ai_sdk` only when the chat messages would not give
 * it back as `fromStored` reads them: a tool result is named after its call, so a text
 * result is stored once. `names` (call id -> tool name) holds the calls stored before;
 * the batch's calls are added to it.
 */
export function toStored(messages: readonly ModelMessage[], names: Map<string, string> = new Map()): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const message of messages) {
    const chats = toChat(message);
    const lossless = same(joinResults(fromChat(chats, new Map(names))), [message]);
    chats.forEach((chat, i) => {
      // The original rides on the first of its chat messages; the others point at it.
      const meta = !lossless ? { [AI_SDK_KEY]: i === 0 ? jsonSafe(message) : null } : i > 0 ? { [AI_SDK_MORE]: true } : undefined;
      out.push((meta ? { ...chat, metadata: meta } : chat) as ChatMessage);
    });
    noteCalls(names, chats);
  }
  return out;
}

/** One tool message for consecutive ones (the results of one step). */
function joinResults(messages: ModelMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of messages) {
    const prev = out[out.length - 1];
    if (prev?.role === "tool" && m.role === "tool") out[out.length - 1] = { ...prev, content: [...prev.content, ...m.content] };
    else out.push(m);
  }
  return out;
}

function noteCalls(names: Map<string, string>, chats: readonly Chat[]): void {
  for (const chat of chats) for (const call of chat.tool_calls ?? []) names.set(call.id, call.function.name);
}

export function toChat(message: ModelMessage): Chat[] {
  switch (message.role) {
    case "system":
      return [{ role: "system", content: message.content }];
    case "user": {
      if (typeof message.content === "string") return [{ role: "user", content: message.content }];
      const parts = message.content.map((part): Json => {
        if (part.type === "text") return { type: "text", text: part.text };
        if (part.type === "image") return { type: "image_url", image_url: { url: dataUrl(part.image, part.mediaType ?? "image/png") } };
        return { type: "text", text: `[file ${part.filename ?? part.mediaType}]` };
      });
      return [{ role: "user", content: parts }];
    }
    case "assistant": {
      if (typeof message.content === "string") return [{ role: "assistant", content: message.content }];
      const text = message.content.filter((p) => p.type === "text").map((p) => p.text).join("");
      const calls: ChatToolCall[] = message.content.flatMap((p) =>
        p.type === "tool-call"
          ? [{ id: p.toolCallId, type: "function" as const, function: { name: p.toolName, arguments: JSON.stringify(p.input ?? {}) } }]
          : [],
      );
      const chat: Chat = { role: "assistant", content: text || (calls.length ? null : "") };
      if (calls.length) chat.tool_calls = calls;
      return [chat];
    }
    case "tool":
      return message.content.map((part) => ({ role: "tool", tool_call_id: part.toolCallId, content: outputText(part.output) }));
  }
}

/** The message as JSON keeps it: binary data (images, files) as base64, which the SDK reads back. */
function jsonSafe(message: ModelMessage): unknown {
  return JSON.parse(
    JSON.stringify(message, (_, value: unknown) => {
      if (value instanceof Uint8Array) return base64(value);
      if (value instanceof ArrayBuffer) return base64(new Uint8Array(value));
      if (value instanceof URL) return value.href;
      return value;
    }),
  );
}

function outputText(output: { type: string; value?: unknown }): string {
  if (output.type === "text" || output.type === "error-text") return String(output.value ?? "");
  if (output.type === "content" && Array.isArray(output.value)) {
    return output.value.map((p: { type?: string; text?: string }) => (p.type === "text" ? p.text : `[${p.type}]`)).join("");
  }
  return JSON.stringify(output.value ?? null);
}

function dataUrl(data: unknown, mediaType: string): string {
  if (data instanceof URL) return data.href;
  if (typeof data === "string") return /^(https?:|data:)/.test(data) ? data : `data:${mediaType};base64,${data}`;
  if (data instanceof Uint8Array) return `data:${mediaType};base64,${base64(data)}`;
  if (data instanceof ArrayBuffer) return `data:${mediaType};base64,${base64(new Uint8Array(data))}`;
  return "";
}

// btoa, not Buffer: the AI SDK also runs on edge runtimes, which have no Buffer.
function base64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

// chat -> AI SDK -------------------------------------------------------------------

/**
 * AI SDK messages for chat messages (a contextd payload), one for each: tool results named
 * after their calls (`names`: the calls read before, and those of `messages`).
 */
export function fromChat(messages: readonly Chat[], names: Map<string, string> = new Map()): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const m of messages) {
    if (m.role === "system") {
      out.push({ role: "system", content: textOf(m.content) });
    } else if (m.role === "user") {
      out.push({ role: "user", content: userContent(m.content) });
    } else if (m.role === "assistant") {
      const calls = m.tool_calls ?? [];
      const text = m.content === null || m.content === undefined ? "" : textOf(m.content);
      if (!calls.length) {
        out.push({ role: "assistant", content: text });
        continue;
      }
      const parts: Exclude<Extract<ModelMessage, { role: "assistant" }>["content"], string> = [];
      if (text) parts.push({ type: "text", text });
      for (const call of calls) {
        names.set(call.id, call.function.name);
        parts.push({ type: "tool-call", toolCallId: call.id, toolName: call.function.name, input: parseArguments(call.function.arguments) });
      }
      out.push({ role: "assistant", content: parts });
    } else if (m.role === "tool") {
      const id = String(m.tool_call_id ?? "");
      out.push({
        role: "tool",
        content: [{ type: "tool-result", toolCallId: id, toolName: names.get(id) ?? m.name ?? "tool", output: { type: "text", value: textOf(m.content) } }],
      });
    }
  }
  return out;
}

const EPHEMERAL = { type: "ephemeral" } as const;

/**
 * Anthropic's prompt-cache breakpoints where contextd's `format=anthropic` puts them: on
 * the system prompt (the first message, when a system one), on the last of the leading
 * system messages (the summary among them), on the last message of the stable prefix
 * (`stablePrefix` messages, those the previous payload also had) and on the last
 * message. Anthropic writes a cache entry only at a breakpoint, so without the last
 * one each new step is paid uncached twice; with none (the AI SDK sets none by itself)
 * nothing is cached. Four at most, the API's limit. `messages` is `fromChat`'s output
 * (one message per chat message), changed in place and returned.
 */
export function markCacheBreakpoints(messages: ModelMessage[], stablePrefix: number): ModelMessage[] {
  if (messages.length === 0) return messages;
  let lead = 0;
  while (lead < messages.length && messages[lead]!.role === "system") lead++;
  const marks = new Set<number>([messages.length - 1]);
  if (lead > 0) marks.add(0).add(lead - 1);
  if (stablePrefix > 0) marks.add(Math.min(stablePrefix, messages.length) - 1);
  for (const i of marks) {
    const m = messages[i]!;
    const options = (m.providerOptions ?? {}) as Record<string, Record<string, unknown>>;
    m.providerOptions = { ...options, anthropic: { ...(options.anthropic ?? {}), cacheControl: EPHEMERAL } } as typeof m.providerOptions;
  }
  return messages;
}

/** The messages before the newest step (contextd's rule when no previous payload is known). */
export function defaultStablePrefix(messages: readonly Chat[]): number {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]!.role === "user" || messages[i]!.role === "assistant") return i;
  }
  return messages.length;
}

/** The AI SDK messages stored messages stand for (the kept originals where there are). */
export function fromStored(messages: readonly Message[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  const names = new Map<string, string>();
  for (const m of messages) {
    const chat = m as unknown as Chat;
    const meta = (m.metadata ?? {}) as Json;
    if (AI_SDK_KEY in meta) {
      noteCalls(names, [chat]);
      const original = meta[AI_SDK_KEY];
      if (original) out.push(original as ModelMessage);
      continue;
    }
    const [message] = fromChat([chat], names);
    if (!message) continue;
    const prev = out[out.length - 1];
    if (meta[AI_SDK_MORE] && prev?.role === "tool" && message.role === "tool") prev.content.push(...message.content);
    else out.push(message);
  }
  return out;
}

/** Equal as JSON values, whatever the order of an object's keys. */
function same(a: unknown, b: unknown): boolean {
  const canonical = (value: unknown) =>
    JSON.stringify(value, (_, v: unknown) =>
      v && typeof v === "object" && !Array.isArray(v)
        ? Object.fromEntries(Object.entries(v as Json).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)))
        : v,
    );
  return canonical(a) === canonical(b);
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text || "{}");
  } catch {
    return text;
  }
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: unknown }) => (typeof p?.text === "string" ? p.text : "")).join("");
  return content === null || content === undefined ? "" : JSON.stringify(content);
}

function userContent(content: unknown): Extract<ModelMessage, { role: "user" }>["content"] {
  if (!Array.isArray(content)) return textOf(content);
  return content.map((p: { type?: string; text?: string; image_url?: { url?: string } }) =>
    p.type === "image_url" && p.image_url?.url
      ? { type: "image" as const, image: new URL(p.image_url.url) }
      : { type: "text" as const, text: String(p.text ?? "") },
  );
}
