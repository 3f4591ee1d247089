/**
 * contextd as the memory of an OpenAI Agents SDK (JS) agent (`@openai/agents`, an
 * optional peer dependency).
 *
 *     import { Agent, run } from "@openai/agents";
 *     import { ContextdSession } from "contextd-client/agents";
 *
 *     const session = new ContextdSession("user-42");
 *     const result = await run(agent, "Hi!", {
 *       session,
 *       callModelInputFilter: session.callModelInputFilter,
 *     });
 *
 * `ContextdSession` implements the SDK's `Session` on contextd's log: items are stored
 * as chat messages (see responses.ts for the mapping, which loses nothing),
 * `getItems(limit)` reads the tail, `popItem` deletes it, `clearSession` empties the
 * log and keeps the session's settings.
 *
 * The SDK sends the model the whole history the session returns. With
 * `callModelInputFilter` the model gets contextd's payload instead: fitted to the
 * window, compacted turns as a summary, large tool outputs as previews, tool calls
 * never split from their results, the agent's instructions and tools budgeted.
 *
 * With `context: { recall: true }` and `session.recallTool()` among the agent's tools,
 * the model can search and read back what the payloads left out (recall.ts).
 */
import { tool, type AgentInputItem, type CallModelInputFilterArgs, type FunctionTool, type ModelInputData, type Session } from "@openai/agents";
import { ContextdClient } from "./client.js";
import { NotFound } from "./errors.js";
import { RECALL_DESCRIPTION, RECALL_PROPERTIES, RECALL_TOOL_NAME, runRecall } from "./recall.js";
import { chatToItems, itemsToMessages, messageToItems, type ChatLike } from "./responses.js";
import type { ChatMessage, ContextOptions, Message } from "./types.js";

export type ContextdSessionOptions = {
  client?: ContextdClient;
  /** The lease's token, when the session is written under one. */
  lockToken?: string;
  /** Passed to every context call of the filter: `max_tokens`, `strategy`, `mode`, ... */
  context?: Omit<ContextOptions, "system" | "tools" | "format">;
};

export class ContextdSession implements Session {
  readonly client: ContextdClient;
  // Items known to be in the log, by their chat form (see `key`): the multiset the
  // filter checks the model input against to find what is not stored yet.
  private readonly known = new Multiset();
  // Items the filter stored ahead of the SDK: the SDK persists them later, as replays.
  private readonly storedAhead = new Multiset();
  // Payload items the filter made that stand for no item of the input (a summary, a
  // preview): the SDK may hand them back to `addItems` as the turn's input; they are
  // contextd's own and never stored again.
  private payloadOnly = new Set<string>();

  constructor(
    readonly sessionId: string,
    private readonly options: ContextdSessionOptions = {},
  ) {
    this.client = options.client ?? new ContextdClient();
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The session's items, oldest first; with `limit`, only the latest `limit`. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && limit <= 0) return [];
    let messages: Message[];
    try {
      // A message holds one item or more: `limit` messages hold enough items.
      messages = limit === undefined ? await this.client.allMessages(this.sessionId) : await this.client.tail(this.sessionId, limit);
    } catch (error) {
      if (error instanceof NotFound) return [];
      throw error;
    }
    let items = messages.flatMap((m) => messageToItems(m as ChatLike));
    if (limit !== undefined) items = items.slice(-limit);
    // What the SDK puts in a model input as history comes from here: all of it is
    // stored. A full read is the whole log; a tail adds to what is known, never shrinks it.
    if (limit === undefined) this.known.reset(items.map(key));
    else this.known.merge(items.map(key));
    return items as AgentInputItem[];
  }

  /** Append items as one batch; items the filter already stored for this turn are skipped. */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const fresh = items.filter((item) => {
      const k = key(item);
      return !this.storedAhead.take(k) && !this.payloadOnly.has(k);
    });
    await this.store(fresh);
  }

  /**
   * Remove the latest item. When it shares a message with others (parallel tool
   * calls), the message is deleted and stored again without it.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    let tail: Message[];
    try {
      tail = await this.client.tail(this.sessionId, 1);
    } catch (error) {
      if (error instanceof NotFound) return undefined;
      throw error;
    }
    const last = tail[0];
    if (!last) return undefined;
    const items = messageToItems(last as ChatLike);
    await this.client.deleteTail(this.sessionId, last.seq, this.writeOptions());
    if (items.length > 1) {
      await this.client.append(this.sessionId, itemsToMessages(items.slice(0, -1)) as ChatMessage[], this.writeOptions());
    }
    const popped = items[items.length - 1];
    if (popped) this.known.take(key(popped));
    return popped as AgentInputItem | undefined;
  }

  /** Empty the log, summary and watermark; the session's settings stay. */
  async clearSession(): Promise<void> {
    this.known.reset([]);
    this.storedAhead.reset([]);
    try {
      await this.client.clear(this.sessionId, this.writeOptions());
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
    }
  }

  /**
   * Use as `run(agent, input, { session, callModelInputFilter: session.callModelInputFilter })`:
   * the model gets contextd's payload, budgeted with the agent's instructions and
   * tools, instead of the whole history.
   *
   * The SDK stores a turn's items when the turn ends; the payload must hold them
   * before every model call, so the filter stores what of the model input is not in
   * the log yet (the user's input, the tool calls and results of earlier steps), and
   * `addItems` later skips those. Payload items that stand for an input item are
   * handed back as that very item, so the SDK's bookkeeping of what it persists
   * stays right; the system block goes as the instructions.
   */
  readonly callModelInputFilter = async (args: CallModelInputFilterArgs<unknown>): Promise<ModelInputData> => {
    const input = args.modelData.input;
    const stored = this.known.copy();
    const unsaved = input.filter((item) => !stored.take(key(item)));
    if (unsaved.length) {
      await this.store(unsaved);
      for (const item of unsaved) this.storedAhead.add(key(item));
    }
    const tools = await toolSchemas(args);
    const payload = await this.client.context(this.sessionId, {
      ...this.options.context,
      system: args.modelData.instructions || undefined,
      tools: tools.length ? tools : undefined,
    });
    const messages = (payload.messages ?? []) as ChatLike[];
    let head = 0;
    while (messages[head]?.role === "system") head++;
    const instructions = messages.slice(0, head).map((m) => textOf(m.content)).join("\n\n");
    const byKey = new Map<string, AgentInputItem[]>();
    for (const item of input) {
      const k = key(item);
      byKey.set(k, [...(byKey.get(k) ?? []), item]);
    }
    const payloadOnly = new Set<string>();
    const items = chatToItems(messages.slice(head)).map((item) => {
      const k = key(item);
      const same = byKey.get(k);
      if (same?.length) return same.shift()!;
      payloadOnly.add(k);
      return item as AgentInputItem;
    });
    this.payloadOnly = payloadOnly;
    return { input: items, instructions };
  };

  /**
   * The recall tool, run against this session: `new Agent({ tools: [..., session.recallTool()] })`
   * with `context: { recall: true }` in the session's options. The filter sends it to
   * contextd with the agent's other tools, so it is budgeted like them.
   */
  recallTool(): FunctionTool {
    return tool({
      name: RECALL_TOOL_NAME,
      description: RECALL_DESCRIPTION,
      // Not strict: strict schemas require every argument, and a call gives `query` or `seq`.
      parameters: { type: "object", properties: { ...RECALL_PROPERTIES }, required: [], additionalProperties: true },
      strict: false,
      execute: (input: unknown) => runRecall(this.client, this.sessionId, input as Record<string, unknown>),
    });
  }

  private async store(items: AgentInputItem[]): Promise<void> {
    if (!items.length) return;
    await this.client.append(this.sessionId, itemsToMessages(items) as ChatMessage[], this.writeOptions());
    for (const item of items) this.known.add(key(item));
  }

  private writeOptions(): { lockToken?: string } {
    return this.options.lockToken ? { lockToken: this.options.lockToken } : {};
  }
}

/** An item by what a chat model reads of it: ids, status and provider data left out. */
function key(item: object): string {
  return JSON.stringify(
    itemsToMessages([item]).map(({ metadata: _m, include_in_context: _i, ...chat }) => chat),
  );
}

class Multiset {
  private counts = new Map<string, number>();
  add(k: string): void {
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
  }
  /** Remove one k; false when there was none. */
  take(k: string): boolean {
    const n = this.counts.get(k) ?? 0;
    if (n === 0) return false;
    if (n === 1) this.counts.delete(k);
    else this.counts.set(k, n - 1);
    return true;
  }
  /** At least as many of each key as `keys` holds. */
  merge(keys: string[]): void {
    const other = new Multiset();
    for (const k of keys) other.add(k);
    for (const [k, n] of other.counts) this.counts.set(k, Math.max(n, this.counts.get(k) ?? 0));
  }
  reset(keys: string[]): void {
    this.counts = new Map();
    for (const k of keys) this.add(k);
  }
  copy(): Multiset {
    const out = new Multiset();
    out.counts = new Map(this.counts);
    return out;
  }
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p: { text?: unknown }) => (typeof p?.text === "string" ? p.text : "")).join("");
  return "";
}

/** The agent's function tools as chat `tools`, so contextd budgets for them. */
async function toolSchemas(args: CallModelInputFilterArgs<unknown>): Promise<Record<string, unknown>[]> {
  const tools = args.agent.tools as { type?: string; name?: string; description?: string; parameters?: unknown }[];
  return tools
    .filter((t) => t.type === "function")
    .map((t) => ({ type: "function", function: { name: t.name, description: t.description ?? "", parameters: t.parameters } }));
}
