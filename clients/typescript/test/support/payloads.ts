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

/** An old turn whose tool output is far over a small preview limit: the payload shows a preview of it. */
export async function seedLargeOutput(ctx: ContextdClient, sessionId: string): Promise<string> {
  const big = Array.from({ length: 400 }, (_, i) => `log line ${i} of big.log: nothing to see here`).join("\n");
  await ctx.append(sessionId, [
    { role: "user", content: "open big.log" },
    {
      role: "assistant",
      content: null,
      tool_calls: [{ id: "old_1", type: "function", function: { name: "read_file", arguments: '{"path":"big.log"}' } }],
    },
    { role: "tool", tool_call_id: "old_1", content: big },
    { role: "assistant", content: "It is long." },
  ]);
  return big;
}
