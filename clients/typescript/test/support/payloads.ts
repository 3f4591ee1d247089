/** Compare what a model was sent with contextd's payload, in the chat format both reduce to. */
import { ContextdClient } from "../../src/index.js";
import type { Context, ContextOptions } from "../../src/index.js";
import { text } from "../../examples/scripted-model.js";

type Chat = { role: string; content?: unknown; tool_calls?: unknown[] | null; tool_call_id?: string };
type Call = { id: string; function: { name: string; arguments: string } };

/** Role, text, tool calls (id, name, parsed arguments) and the answered call id of each message. */
export function shape(messages: readonly Chat[]): unknown[] {
  return messages.map((m) => ({
    role: m.role,
    text: text(m.content),
    calls: ((m.tool_calls ?? []) as Call[]).map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments || "{}")]),
    answers: m.tool_call_id ?? null,
  }));
}

/** A client that keeps every payload it fetched, in order. */
export class RecordingClient extends ContextdClient {
  readonly payloads: Context[] = [];
  override async context(sessionId: string, options?: ContextOptions, previous?: string | null): Promise<Context> {
    const payload = await super.context(sessionId, options, previous);
    this.payloads.push(payload);
    return payload;
  }
}
