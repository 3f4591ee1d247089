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
import { chatToItems, itemsToMessages, messageToItems, unansweredResults, type ChatLike, type Item } from "./responses.js";
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
  // The tool name of each call known to be in the log (call id -> name): a tool result
  // stored after its call is read back named after it, so it needs no verbatim copy.
  private readonly callNames = new Map<string, string>();
  // What the filter did in the running turn (see `Turn`): what `addItems` skips.
  private turn = new Turn();

  constructor(
    readonly sessionId: string,
    private readonly options: ContextdSessionOptions = {},
  ) {
    this.client = options.client ?? new ContextdClient();
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /**
   * The session's items, oldest first; with `limit`, only the latest `limit`. The SDK
   * reads them when a run starts: what an earlier run that failed stored ahead is in
   * them, and is forgotten as a turn's bookkeeping.
   */
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
    let items = await this.itemsOf(messages);
    if (limit !== undefined) items = items.slice(-limit);
    // What the SDK puts in a model input as history comes from here: all of it is
    // stored. A full read is the whole log; a tail adds to what is known, never shrinks it.
    if (limit === undefined) this.known.reset(items.map(key));
    else this.known.merge(items.map(key));
    this.turn = new Turn();
    return items as AgentInputItem[];
  }

  /**
   * Append items as one batch. The SDK gives a turn's items when the turn ends: its input
   * and every step, of which the filter stored all but the last model answer ahead, and
   * the payload's own items the filter handed over (a summary, a preview, what another
   * writer appended meanwhile). Only those are skipped, matched by what identifies them
   * (see `Turn.unstored`); everything else is stored.
   */
  async addItems(items: AgentInputItem[]): Promise<void> {
    const turn = this.turn;
    this.turn = new Turn();
    await this.store(turn.unstored(items));
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
    const items = await this.itemsOf([last]);
    await this.client.deleteTail(this.sessionId, last.seq, this.writeOptions());
    if (items.length > 1) {
      await this.client.append(this.sessionId, itemsToMessages(items.slice(0, -1), new Map(this.callNames)) as ChatMessage[], this.writeOptions());
    }
    const popped = items[items.length - 1];
    if (popped) this.known.take(key(popped));
    this.turn = new Turn();
    return popped as AgentInputItem | undefined;
  }

  /** Empty the log, summary and watermark; the session's settings stay. */
  async clearSession(): Promise<void> {
    this.known.reset([]);
    this.callNames.clear();
    this.turn = new Turn();
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
   *
   * Items go without the provider's item ids (`fc_...`, `msg_...`), as the Python
   * client sends them: a payload holds no reasoning items (they are stored out of
   * context), and OpenAI refuses an output item with an id whose reasoning item is
   * missing. The call ids stay.
   */
  readonly callModelInputFilter = async (args: CallModelInputFilterArgs<unknown>): Promise<ModelInputData> => {
    const input = args.modelData.input;
    for (const item of input) noteCall(this.callNames, item);
    const stored = this.known.copy();
    const unsaved = input.filter((item) => !stored.take(key(item)));
    if (unsaved.length) {
      await this.store(unsaved);
      this.turn.storedAhead(unsaved);
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
    const handedOver: object[] = [];
    const items = chatToItems(messages.slice(head)).map((item) => {
      const same = byKey.get(key(item));
      const given = same?.length ? same.shift()! : undefined;
      const out = given ? withoutItemId(given) : (item as AgentInputItem);
      // The SDK stores an item it cannot trace to an input item as part of the turn's input.
      if (out !== given) handedOver.push(out);
      return out;
    });
    this.turn.handedOver(handedOver);
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
      // Not strict: strict schemas require every argument, and a call gives `query`, `seq` or `seqs`.
      parameters: { type: "object", properties: { ...RECALL_PROPERTIES }, required: [], additionalProperties: true },
      strict: false,
      execute: (input: unknown) => runRecall(this.client, this.sessionId, input as Record<string, unknown>),
    });
  }

  private async store(items: readonly object[]): Promise<void> {
    if (!items.length) return;
    const names = new Map(this.callNames);
    await this.client.append(this.sessionId, itemsToMessages(items, names) as ChatMessage[], this.writeOptions());
    for (const item of items) {
      this.known.add(key(item));
      noteCall(this.callNames, item);
    }
  }

  /**
   * The items stored messages stand for, read in order so that a tool result is named
   * after its call; a result whose call is older than `messages` has it looked up.
   */
  private async itemsOf(messages: readonly Message[]): Promise<Item[]> {
    const names = new Map<string, string>();
    const missing = unansweredResults(messages as unknown as ChatLike[]);
    let before = messages[0]?.seq;
    while (missing.size && before !== undefined && before > 1) {
      const page = await this.client.messages(this.sessionId, { order: "desc", before_seq: before, limit: 20 });
      for (const m of page.messages) {
        for (const call of (m.tool_calls ?? []) as { id: string; function: { name: string } }[]) {
          if (missing.delete(call.id)) names.set(call.id, call.function.name);
        }
      }
      if (page.next_before_seq === null || page.messages.length === 0) break;
      before = page.next_before_seq;
    }
    const items = messages.flatMap((m) => messageToItems(m as unknown as ChatLike, names));
    for (const [id, name] of names) this.callNames.set(id, name);
    return items;
  }

  private writeOptions(): { lockToken?: string } {
    return this.options.lockToken ? { lockToken: this.options.lockToken } : {};
  }
}

/**
 * What the filter did in one turn (one run), for the turn's `addItems`: the items it
 * stored ahead of the SDK, in order, and the items of its last payload that the SDK
 * could not trace to an input item (it stores those as the turn's input). A new turn
 * (`getItems`, which the SDK calls when a run starts) forgets a failed one's.
 */
class Turn {
  private ahead: { ident: string; step: boolean }[] = [];
  private calls = 0;
  private handed = new Multiset();

  storedAhead(items: readonly object[]): void {
    // The first model call stores the run's input; later ones the steps the model took.
    const step = this.calls > 0;
    for (const item of items) this.ahead.push({ ident: ident(item), step });
  }

  /** At the end of each model call's filter: what this payload handed over. */
  handedOver(items: readonly object[]): void {
    this.calls++;
    this.handed.reset(items.map(ident));
  }

  /**
   * The items of a turn's `addItems` that are not in the log yet. The SDK gives the
   * turn's input (as the filter handed it over) and then its steps, in order: an item
   * stored ahead is matched in that order by its identity (call id, provider id and
   * content), a handed-over one only among the input; the model's last answer matches
   * neither, whatever its text.
   */
  unstored(items: readonly AgentInputItem[]): AgentInputItem[] {
    const out: AgentInputItem[] = [];
    let next = 0; // the first stored-ahead item not matched yet
    let inInput = true;
    for (const item of items) {
      const id = ident(item);
      const at = this.ahead.findIndex((entry, i) => i >= next && entry.ident === id);
      if (at >= 0) {
        if (this.ahead[at]!.step) inInput = false;
        next = at + 1;
        continue;
      }
      if (inInput && this.handed.take(id)) continue;
      inInput = false;
      out.push(item);
    }
    return out;
  }
}

/**
 * What identifies an item within a turn: its call id (unique to the call), else its
 * content with the provider's id when it has one (an answer's `msg_...`; a chat model
 * may give every answer the same one).
 */
function ident(item: object): string {
  const it = item as Item;
  const callId = it.callId ?? it.call_id;
  if (typeof callId === "string" && callId && typeof it.type === "string") return `${it.type}#${callId}`;
  return typeof it.id === "string" && it.id ? `${key(item)}@${it.id}` : key(item);
}

/** The item without the provider's id (itself when it has none). */
function withoutItemId<T extends object>(item: T): T {
  if (!("id" in item) || (item as Item).type === "reasoning") return item;
  const { id: _id, ...rest } = item as Item;
  return rest as T;
}

function noteCall(names: Map<string, string>, item: object): void {
  const it = item as Item;
  if (it.type !== "function_call") return;
  const callId = it.callId ?? it.call_id;
  if (typeof callId === "string" && typeof it.name === "string") names.set(callId, it.name);
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
