/**
 * A scripted OpenAI Responses API model, in process: `openai()` is an `OpenAI` client
 * whose `fetch` answers `POST /responses` from `script` (what to answer to the request's
 * input), so the Agents SDK's default model (`OpenAIResponsesModel`) runs without a
 * server. With `reasoning` each answer starts with a reasoning item (`rs_N`, encrypted
 * content), as a reasoning model's do; its function calls carry `fc_...` ids and its
 * messages `msg_...` ids. `fail(n, status)` makes the n-th request (from 0) fail.
 * Every request body is kept in `requests`.
 */
import OpenAI from "openai";

export type Input = Record<string, unknown>;
export type Answer = { text?: string; calls?: { name: string; args: object }[] };

export class ResponsesModel {
  readonly requests: { input: Input[]; instructions?: string }[] = [];
  reasoning = false;
  private readonly failures = new Map<number, number>();
  private n = 0;

  constructor(private readonly script: (input: Input[]) => Answer) {}

  fail(request: number, status = 500): void {
    this.failures.set(request, status);
  }

  openai(): OpenAI {
    return new OpenAI({ apiKey: "none", baseURL: "http://responses.invalid/v1", maxRetries: 0, fetch: this.fetch });
  }

  private readonly fetch = async (_url: unknown, init?: { body?: unknown }): Promise<Response> => {
    const body = JSON.parse(String(init?.body)) as { input: string | Input[]; instructions?: string; model: string };
    const input = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input;
    const index = this.requests.length;
    this.requests.push({ input, instructions: body.instructions });
    const status = this.failures.get(index);
    const json = (data: object, code = 200) => new Response(JSON.stringify(data), { status: code, headers: { "content-type": "application/json" } });
    if (status) return json({ error: { message: "scripted failure", type: "server_error" } }, status);
    const answer = this.script(input);
    const id = ++this.n;
    const output: object[] = [];
    if (this.reasoning) output.push({ type: "reasoning", id: `rs_${id}`, summary: [], encrypted_content: `enc_${id}` });
    if (answer.text !== undefined) {
      output.push({ type: "message", id: `msg_${id}`, role: "assistant", status: "completed", content: [{ type: "output_text", text: answer.text, annotations: [] }] });
    }
    (answer.calls ?? []).forEach((c, i) =>
      output.push({ type: "function_call", id: `fc_${id}_${i}`, call_id: `call_${id}_${i}`, name: c.name, arguments: JSON.stringify(c.args), status: "completed" }),
    );
    const usage = { input_tokens: 10, output_tokens: 5, total_tokens: 15, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
    return json({ id: `resp_${id}`, object: "response", created_at: 0, status: "completed", model: body.model, output, usage });
  };
}

/** The last input item, as what the model reacts to: a user's text, or a tool's output. */
export function last(input: Input[]): { kind: "user" | "tool" | "other"; text: string } {
  const item = input[input.length - 1] ?? {};
  if (item.type === "function_call_output") return { kind: "tool", text: typeof item.output === "string" ? item.output : JSON.stringify(item.output) };
  const content = item.content;
  const text = typeof content === "string" ? content : Array.isArray(content) ? content.map((p: { text?: string }) => p.text ?? "").join("") : "";
  return { kind: item.role === "user" ? "user" : "other", text };
}
