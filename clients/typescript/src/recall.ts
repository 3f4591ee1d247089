/**
 * The recall tool, run by the client: what trimming and compaction took out of a
 * payload, fetched back by the model itself (the Python client's `recall` module, the
 * same answers).
 *
 * A payload asked with `recall: true` (or from a session whose `recall` setting is on)
 * offers the model a tool named `recall`, and says in a system note which messages it
 * leaves out. When the model calls the tool, pass the call's arguments to `runRecall`
 * and append its answer as the tool result, like any other:
 *
 *     const payload = await ctx.context(sid, { recall: true });
 *     // ... the model calls `recall` ...
 *     const output = await runRecall(ctx, sid, call.function.arguments);
 *
 * `{"query": ...}` searches the whole log (`GET /sessions/{id}/search`); `{"seq": N}`
 * reads one message in full, or `line_start`..`line_end` of it; `{"seqs": "412-431"}`
 * reads the messages a summary item cites (`[#412-431]`, `[#3,7-9]`), at most
 * `RANGE_MAX_MESSAGES` messages and `RANGE_MAX_CHARS` characters a read: long messages
 * are cut to their share, and the answer says how to read on. `from_seq`/`to_seq`, or
 * a `seq` written as a range, read a range too. A call the server refuses (a bad query,
 * a seq past the end) answers with the reason, so the model can try again instead of
 * the run failing. The adapters wrap this in their framework's
 * tool: `ContextdMemory.recallTool()` (AI SDK), `ContextdSession.recallTool()` (Agents
 * SDK), `recallTool()` of `contextd-client/langchain`.
 */
import type { ContextdClient } from "./client.js";
import { ContextdError } from "./errors.js";
import type { MessageOut, MessagePage, SearchResult } from "./types.js";

export const RECALL_TOOL_NAME = "recall";
// The server's own definition (app/core/recall_tool.py); a payload with recall carries it.
export const RECALL_DESCRIPTION =
  "Recall what is no longer shown of this conversation. Give `query` to search its whole " +
  "history (words, identifiers, file paths, error codes, any language): the answer lists " +
  "matching messages by seq with a snippet. Give `seq` to read that message in full, or " +
  "`line_start`/`line_end` of it; `seqs` to read what a summary item cites, as written " +
  '(`[#412-431]`: "412-431"). At most 50 messages and 20,000 characters a read; the ' +
  "answer says how to read on.";
export const RECALL_PROPERTIES = {
  query: { type: "string", description: "what to search for" },
  seq: { type: "integer", description: "the message to read in full" },
  seqs: { type: "string", description: 'as cited: "412-431" or "3,7-9"' },
  line_start: { type: "integer", description: "first line to read (1-based)" },
  line_end: { type: "integer", description: "last line to read (inclusive)" },
} as const;
export const RECALL_PARAMETERS = { type: "object", properties: RECALL_PROPERTIES, additionalProperties: false } as const;
export const SEARCH_LIMIT = 5;
/** A message read in full is cut here (the model reads on by lines). */
export const MAX_READ_CHARS = 20_000;
/** A range read (`seqs`): at most this many messages and characters of text, as the
 * tool's description says; the server cuts the page's texts to their share. */
export const RANGE_MAX_MESSAGES = 50;
export const RANGE_MAX_CHARS = 20_000;
export const NO_ARGUMENTS = 'Give `query` (what to search for), `seq` (the message to read) or `seqs` (the messages a summary cites: "412-431").';

export type RecallArguments = { query?: string; seq?: number; seqs?: string; line_start?: number; line_end?: number; limit?: number };

/** The Chat Completions definition of the recall tool. */
export function recallTool(): { type: "function"; function: { name: string; description: string; parameters: typeof RECALL_PARAMETERS } } {
  return { type: "function", function: { name: RECALL_TOOL_NAME, description: RECALL_DESCRIPTION, parameters: RECALL_PARAMETERS } };
}

/** Search hits as lines for a model. */
export function formatSearch(result: SearchResult): string {
  if (!result.hits.length) return `No message of this conversation matches ${quote(result.query)}.`;
  const lines = [`${result.hits.length} messages match ${quote(result.query)} (read one with seq, and line_start/line_end around the line):`];
  for (const h of result.hits) {
    const who = h.role + (h.tool_name ? ` ${h.tool_name}` : "");
    const where = h.line !== null && h.line !== undefined ? ` line ${h.line}` : "";
    lines.push(`seq ${h.seq} (${who})${where}: ${h.snippet}`);
  }
  return lines.join("\n");
}

type Readable = MessageOut & { name?: string | null; content?: unknown; tool_calls?: unknown[] | null };

/** A message's text for a model: its content, then its tool calls as JSON. */
function textOf(m: Readable): string {
  let text: string;
  if (Array.isArray(m.content)) {
    text = m.content.map((p: unknown) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : "")).join("\n");
  } else {
    text = m.content === null || m.content === undefined ? "" : String(m.content);
  }
  if (m.tool_calls && m.tool_calls.length) text += (text ? "\n" : "") + JSON.stringify(m.tool_calls);
  return text;
}

const who = (m: Readable) => `${m.role}${m.name ? ` ${m.name}` : ""}`;

/** One message for a model: a header line, then its text (or its tool calls). */
export function formatMessage(message: MessageOut): string {
  const m = message as Readable;
  let head = `seq ${m.seq} (${who(m)})`;
  const range = m.range as { unit?: string; start?: number; end?: number; total?: number } | null | undefined;
  if (range) head += `, ${range.unit}s ${range.start}-${range.end} of ${range.total}`;
  let text = textOf(m);
  if (text.length > MAX_READ_CHARS) text = `${text.slice(0, MAX_READ_CHARS)}\n[cut: read on with line_start/line_end]`;
  return `${head}:\n${text}`;
}

/** The length every text is cut to so that all of them hold at most `budget`
 * characters, the short ones whole; null when all fit (the server's rule). */
export function share(lengths: number[], budget: number): number | null {
  if (lengths.reduce((a, b) => a + b, 0) <= budget) return null;
  let left = budget;
  let count = lengths.length;
  for (const n of [...lengths].sort((a, b) => a - b)) {
    if (n * count > left) return Math.floor(left / count);
    left -= n;
    count -= 1;
  }
  return null;
}

/** How many characters of its content the server cut off (its `range`), else 0. */
function cutOff(m: Readable): number {
  const r = m.range as { unit?: unknown; end?: unknown; total?: unknown } | null | undefined;
  if (r && typeof r === "object" && r.unit === "char" && Number.isInteger(r.end) && Number.isInteger(r.total)) {
    const off = (r.total as number) - (r.end as number);
    if (off > 0) return off;
  }
  return 0;
}

/** The messages of a range read for a model: each under a `seq N (role)` line, the
 * long ones cut to their share with a note, then how to read on if the read stopped. */
export function formatRange(page: MessagePage, seqs: string): string {
  if (!page.messages.length) return `No message of this conversation is in seqs ${seqs} (its last seq is ${page.last_seq}).`;
  const messages = page.messages as Readable[];
  const texts = messages.map(textOf);
  const level = share(texts.map((t) => t.length), RANGE_MAX_CHARS);
  const parts = messages.map((m, i) => {
    const text = texts[i]!;
    const total = text.length + cutOff(m);
    let shown = level === null ? text : text.slice(0, level);
    let head = `seq ${m.seq} (${who(m)})`;
    if (shown.length < total) {
      head += `, first ${shown.length} of ${total} characters`;
      shown += `\n[cut: read it whole with seq ${m.seq}, or line_start/line_end]`;
    }
    return `${head}:\n${shown}`;
  });
  if (page.next_seqs) parts.push(`[more: this read stopped at ${RANGE_MAX_MESSAGES} messages; read on with seqs "${page.next_seqs}"]`);
  return parts.join("\n");
}

/** The range a call asks for, as a citation: `seqs` (or `range`) as given, a list of
 * seqs, `from_seq`/`to_seq`, `seq` with `to_seq`, or a `seq` written as a range. */
function seqsOf(given: Record<string, unknown>): string | undefined {
  for (const key of ["seqs", "range"]) {
    let value = given[key];
    if (Array.isArray(value)) value = value.map(String).join(",");
    if ((typeof value === "string" || (typeof value === "number" && Number.isInteger(value))) && String(value).trim()) return String(value);
  }
  let first = int(given.from_seq);
  if (first === undefined && given.to_seq !== undefined && given.to_seq !== null) first = int(given.seq);
  if (first !== undefined) {
    const last = int(given.to_seq);
    return `${first}-${last ?? first}`;
  }
  const seq = given.seq;
  if (typeof seq === "string" && int(seq) === undefined && /\d/.test(seq)) return seq;
  return undefined;
}

/** Run one recall call (its arguments as JSON text or an object); the tool's output. */
export async function runRecall(client: ContextdClient, sessionId: string, args: string | RecallArguments | Record<string, unknown> | null | undefined): Promise<string> {
  const given = parse(args);
  const seqs = seqsOf(given);
  const seq = int(given.seq);
  try {
    if (seqs !== undefined) {
      return formatRange(await client.messages(sessionId, { seqs, limit: RANGE_MAX_MESSAGES, max_chars: RANGE_MAX_CHARS }), seqs);
    }
    if (seq !== undefined) {
      const range: { line_start?: number; line_end?: number } = {};
      const start = int(given.line_start);
      const end = int(given.line_end);
      if (start !== undefined) range.line_start = start;
      if (end !== undefined) range.line_end = end;
      return formatMessage(await client.message(sessionId, seq, range));
    }
    const query = given.query;
    if (typeof query === "string" && query.trim()) {
      return formatSearch(await client.search(sessionId, { q: query, limit: int(given.limit) ?? SEARCH_LIMIT }));
    }
  } catch (error) {
    if (error instanceof ContextdError) return `recall failed: ${error.message}`;
    throw error;
  }
  return NO_ARGUMENTS;
}

function parse(args: string | Record<string, unknown> | null | undefined): Record<string, unknown> {
  if (args === null || args === undefined || args === "") return {};
  if (typeof args !== "string") return { ...args };
  try {
    const parsed: unknown = JSON.parse(args);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    return { query: String(parsed) };
  } catch {
    return { query: args }; // a model that sent the query bare
  }
}

function int(value: unknown): number | undefined {
  if (value === null || value === undefined || value === "") return undefined;
  const n = typeof value === "number" ? value : Number(value);
  return Number.isInteger(n) ? n : undefined;
}

// What Python's str.isprintable() refuses (space aside): controls, format characters,
// surrogates, private use, unassigned, and separators other than the space.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
const ESCAPES: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * Python's `repr` of a string, as the Python client's answers quote the query: single
 * quotes unless the text has one and no double quote; backslashes, the quote, line
 * breaks, tabs and unprintable characters escaped (`\x00`, `\u200b`, `\U000e0001`).
 */
export function pyRepr(text: string): string {
  const q = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = "";
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch in ESCAPES) out += ESCAPES[ch];
    else if (ch === q) out += `\\${q}`;
    else if (ch !== " " && UNPRINTABLE.test(ch)) {
      const hex = code.toString(16);
      out += code < 0x100 ? `\\x${hex.padStart(2, "0")}` : code < 0x10000 ? `\\u${hex.padStart(4, "0")}` : `\\U${hex.padStart(8, "0")}`;
    } else out += ch;
  }
  return q + out + q;
}

const quote = pyRepr;
