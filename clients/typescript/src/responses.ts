/**
 * OpenAI Agents SDK (JS) items <-> contextd chat messages, without loss (pure, no SDK):
 * the Python client's `_responses` module, rule for rule, in the JS SDK's protocol
 * (`callId`, `function_call_result` with a `name`, assistant text as `output_text`
 * parts; the Responses API's `call_id` and `function_call_output` are read too).
 *
 * contextd stores chat messages, because that is what it assembles payloads from;
 * the Agents SDK keeps Responses-style items. A batch of items becomes chat messages:
 *
 * - a user/system/developer/assistant `message` -> a message of that role (`developer`
 *   as `system`), its text and image parts as chat parts;
 * - consecutive `function_call` items -> ONE assistant message with `tool_calls`
 *   (parallel calls must share a message for a chat model), and each
 *   `function_call_result` -> a `tool` message;
 * - a `reasoning` item, or any item a chat model cannot take (web search, computer
 *   calls, ...) -> an assistant message with `include_in_context: false`: kept in the
 *   log, never in a payload.
 *
 * Whenever the plain chat message would not give the exact items back, the items are
 * stored verbatim in `metadata.responses_items`, and reading prefers them, so
 * `messageToItems` over `itemsToMessages(x)` gives `x` back for every batch. A tool
 * result is read back named after its call (`names`: call id -> tool name, from the
 * calls read before it; the call is always earlier in the log), so a plain text result
 * whose name is its call's needs no copy: a large output is stored once, not twice.
 */
export const ITEMS_KEY = "responses_items";

export type Item = Record<string, unknown>;
export type ChatLike = Record<string, unknown>;

/**
 * Chat messages (with contextd flags) for a batch of Responses items, in order.
 * `names` (call id -> tool name) holds the calls stored before the batch; the batch's
 * own calls are added to it.
 */
export function itemsToMessages(items: readonly object[], names: Map<string, string> = new Map()): ChatLike[] {
  const out: ChatLike[] = [];
  let pending: Item[] = []; // consecutive function calls, merged into one message
  const flush = () => {
    if (!pending.length) return;
    out.push(stored(callsMessage(pending), pending, names));
    for (const call of pending) names.set(callIdOf(call), String(call.name));
    pending = [];
  };
  for (const raw of items) {
    const item = plain(raw);
    if (item.type === "function_call") {
      pending.push(item);
      continue;
    }
    flush();
    out.push(stored(oneMessage(item), [item], names));
  }
  flush();
  return out;
}

/**
 * The Responses items a stored message stands for (the verbatim ones if kept). Read the
 * log in order with one `names` map, so a tool result is named after its call.
 */
export function messageToItems(message: ChatLike, names: Map<string, string> = new Map()): Item[] {
  const meta = message.metadata as Record<string, unknown> | null | undefined;
  const kept = meta && typeof meta === "object" ? meta[ITEMS_KEY] : undefined;
  if (!Array.isArray(kept)) return chatToItems([message], names);
  const items = kept.map((i) => ({ ...(i as Item) }));
  for (const item of items) if (item.type === "function_call") names.set(callIdOf(item), String(item.name));
  return items;
}

/** The ids of the calls whose results `messages` hold but whose calls they do not. */
export function unansweredResults(messages: readonly ChatLike[]): Set<string> {
  const calls = new Set<string>();
  const missing = new Set<string>();
  for (const msg of messages) {
    for (const call of (msg.tool_calls as ChatLike[] | null | undefined) ?? []) calls.add(String(call.id));
    const kept = (msg.metadata as Record<string, unknown> | null | undefined)?.[ITEMS_KEY];
    if (msg.role === "tool" && !Array.isArray(kept) && !calls.has(String(msg.tool_call_id))) missing.add(String(msg.tool_call_id));
  }
  return missing;
}

/** Responses input items for chat messages (a contextd payload, say). */
export function chatToItems(messages: readonly ChatLike[], names: Map<string, string> = new Map()): Item[] {
  const out: Item[] = [];
  for (const msg of messages) {
    const role = msg.role;
    if (role === "tool") {
      out.push(outputItem(msg, names));
      continue;
    }
    const content = msg.content;
    if (role === "assistant") {
      if ((content !== null && content !== undefined) || (msg.refusal !== null && msg.refusal !== undefined)) {
        out.push(assistantItem(msg));
      }
      for (const call of (msg.tool_calls as ChatLike[] | null | undefined) ?? []) {
        const item = callItem(call);
        names.set(String(item.callId), String(item.name));
        out.push(item);
      }
      continue;
    }
    out.push({ type: "message", role, content: partsToResponses(content) });
  }
  return out;
}

// items -> chat --------------------------------------------------------------------

function plain(item: object): Item {
  // SDK items may carry undefined fields: what JSON keeps is what is stored.
  return JSON.parse(JSON.stringify(item)) as Item;
}

/** Equal as JSON values: the order of an object's keys does not matter. */
function same(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

function callIdOf(item: Item): string {
  return String(item.callId ?? item.call_id ?? item.id);
}

function stored(message: ChatLike, items: Item[], names: Map<string, string>): ChatLike {
  const { include_in_context, metadata: _metadata, ...chat } = message;
  // Read back as a reader of the log would: after the calls stored before it. A result
  // whose call is not known here keeps its copy (its name could not be checked).
  if (!same(chatToItems([chat], new Map(names)), items) || include_in_context === false) {
    message.metadata = { [ITEMS_KEY]: items };
  }
  return message;
}

function callsMessage(calls: Item[]): ChatLike {
  const tool_calls = calls.map((c) => ({
    id: String(c.callId ?? c.call_id ?? c.id),
    type: "function",
    function: { name: String(c.name), arguments: String(c.arguments ?? "") },
  }));
  return { role: "assistant", content: null, tool_calls };
}

function oneMessage(item: Item): ChatLike {
  const kind = item.type ?? "message";
  if (kind === "function_call_result" || kind === "function_call_output") {
    return { role: "tool", tool_call_id: String(item.callId ?? item.call_id), content: outputText(item.output) };
  }
  const role = item.role;
  if (kind === "message" && (role === "user" || role === "system" || role === "developer" || role === "assistant")) {
    const chatRole = role === "developer" ? "system" : role;
    let content = partsToChat(item.content, chatRole);
    if (chatRole === "assistant" && Array.isArray(content)) content = textOf(content); // chat assistants take text
    return { role: chatRole, content };
  }
  // Reasoning, web search, computer calls, ...: in the log, out of every payload.
  return { role: "assistant", content: summaryOf(item), include_in_context: false };
}

function partsToChat(content: unknown, role: string): unknown {
  if (!Array.isArray(content)) return typeof content === "string" ? content : JSON.stringify(content);
  const parts: ChatLike[] = [];
  for (const part of content as Item[]) {
    const kind = part && typeof part === "object" ? part.type : undefined;
    if (kind === "input_text" || kind === "output_text" || kind === "text") {
      parts.push({ type: "text", text: String(part.text ?? "") });
    } else if (kind === "refusal") {
      parts.push({ type: "text", text: String(part.refusal ?? "") });
    } else if (kind === "input_image" && role === "user" && part.image_url) {
      parts.push({ type: "image_url", image_url: { url: part.image_url, detail: part.detail || "auto" } });
    } else {
      // a file, audio, ... a chat model cannot be given here: say it was there
      parts.push({ type: "text", text: `[${String(kind || "part")}]` });
    }
  }
  if (role !== "user" && !parts.every((p) => p.type === "text")) return textOf(parts);
  return parts.length ? parts : "";
}

function textOf(parts: readonly ChatLike[]): string {
  return parts.filter((p) => p.type === "text").map((p) => String(p.text ?? "")).join("");
}

function outputText(output: unknown): unknown {
  if (typeof output === "string") return output;
  if (output && typeof output === "object" && (output as Item).type === "text") return String((output as Item).text ?? "");
  if (Array.isArray(output)) {
    const texts = (output as Item[]).filter((p) => p && typeof p === "object" && p.type === "input_text");
    if (texts.length === output.length && texts.length) return texts.map((p) => String(p.text ?? "")).join("");
  }
  return JSON.stringify(output);
}

function summaryOf(item: Item): string {
  const summary = item.summary;
  if (Array.isArray(summary)) {
    const text = (summary as Item[]).filter((s) => s && typeof s === "object").map((s) => String(s.text ?? "")).join(" ");
    if (text.trim()) return text;
  }
  return `[${String(item.type ?? "item")}]`;
}

// chat -> items --------------------------------------------------------------------

function assistantItem(msg: ChatLike): Item {
  const content = msg.content;
  const text =
    content === null || content === undefined
      ? String(msg.refusal ?? "")
      : typeof content === "string"
        ? content
        : textOf(content as ChatLike[]);
  return { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] };
}

function callItem(call: ChatLike): Item {
  const fn = (call.function ?? {}) as ChatLike;
  return { type: "function_call", callId: call.id, name: fn.name, arguments: fn.arguments, status: "completed" };
}

function outputItem(msg: ChatLike, names: Map<string, string>): Item {
  const content = msg.content;
  const text = typeof content === "string" ? content : textOf((content ?? []) as ChatLike[]);
  const callId = String(msg.tool_call_id ?? "");
  return { type: "function_call_result", callId, name: names.get(callId) ?? "", status: "completed", output: { type: "text", text } };
}

function partsToResponses(content: unknown): unknown {
  if (!Array.isArray(content)) return content;
  return (content as ChatLike[]).map((part) => {
    if (part.type === "image_url") {
      const image = (part.image_url ?? {}) as ChatLike;
      return { type: "input_image", image_url: image.url, detail: image.detail || "auto" };
    }
    return { type: "input_text", text: String(part.text ?? "") };
  });
}
