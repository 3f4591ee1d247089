/**
 * A scripted OpenAI-compatible chat-completions server on 127.0.0.1 (a free port): a
 * tool-using agent with no model behind it. After a user message it calls the first
 * tool offered with `{"path": <the first file name in the user message, else its
 * last word>}`; after tool
 * results it answers, quoting the first line of the last result. With the recall tool
 * offered, a user message "Recall X" is a recall search for X, and search hits are
 * followed by reading the message of the first hit in a tool output (`{"seq": N}`, two
 * lines either side of the match when the hit names its line) before the answer. Every request body is
 * kept in `calls`, so a test can check what the model was sent. `stream: true`
 * requests are answered as server-sent events.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type ChatRequest = {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: string; function: { name: string } }[];
  stream?: boolean;
};

export class ScriptedModel {
  readonly calls: ChatRequest[] = [];
  private server: Server | undefined;
  private counter = 0;
  baseUrl = "";

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    const { port } = this.server.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}/v1`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    if (!req.url?.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ChatRequest;
    this.calls.push(body);
    const message = this.reply(body);
    const id = `chatcmpl-${++this.counter}`;
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    const finish = message.tool_calls ? "tool_calls" : "stop";
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          id,
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model: body.model,
          choices: [{ index: 0, message, finish_reason: finish }],
          usage,
        }),
      );
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    const chunk = (delta: object, finish_reason: string | null) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model, choices: [{ index: 0, delta, finish_reason }] })}\n\n`;
    const delta = message.tool_calls
      ? { role: "assistant", tool_calls: message.tool_calls.map((c, index) => ({ index, ...c })) }
      : { role: "assistant", content: message.content };
    res.write(chunk(delta, null));
    res.write(chunk({}, finish));
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: body.model, choices: [], usage })}\n\n`);
    res.end("data: [DONE]\n\n");
  }

  private reply(body: ChatRequest): {
    role: "assistant";
    content: string | null;
    tool_calls?: { id: string; type: "function"; function: { name: string; arguments: string } }[];
  } {
    const last = body.messages[body.messages.length - 1];
    const tool = body.tools?.[0]?.function.name;
    const recall = body.tools?.some((t) => t.function.name === "recall");
    const call = (name: string, args: object) => ({
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id: `call_${this.counter + 1}`, type: "function" as const, function: { name, arguments: JSON.stringify(args) } }],
    });
    const asked = last?.role === "user" ? /^Recall (.+)$/.exec(text(last.content).trim()) : null;
    if (asked && recall) return call("recall", { query: asked[1] });
    // The first hit in a tool output (the user's own question matches too), and a few
    // lines around its match when the answer names the line.
    const found = last?.role === "tool" && recall && /^\d+ messages match/.test(text(last.content));
    const hit = found ? /^seq (\d+) \(tool[^)]*\)(?: line (\d+))?:/m.exec(text(last.content)) : null;
    if (hit) {
      const line = hit[2] ? Number(hit[2]) : undefined;
      return call("recall", line ? { seq: Number(hit[1]), line_start: Math.max(1, line - 2), line_end: line + 2 } : { seq: Number(hit[1]) });
    }
    if (last?.role === "user" && tool) {
      const words = text(last.content).trim().split(/\s+/).map((w) => w.replace(/[?.!,]+$/, ""));
      const path = words.find((w) => /\w\.\w+$/.test(w)) ?? words[words.length - 1] ?? "";
      const call = { id: `call_${this.counter + 1}`, type: "function" as const, function: { name: tool, arguments: JSON.stringify({ path }) } };
      return { role: "assistant", content: null, tool_calls: [call] };
    }
    if (last?.role === "tool") {
      return { role: "assistant", content: `The file says: ${text(last.content).split("\n")[0]}` };
    }
    return { role: "assistant", content: "Hello." };
  }
}

export function text(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : "")).join("");
  }
  return "";
}

/**
 * The model the examples talk to: a real endpoint when OPENAI_BASE_URL is set (with
 * OPENAI_API_KEY and MODEL), else a scripted model started here.
 */
export async function startModel(): Promise<{ baseUrl: string; apiKey: string; name: string; stop: () => Promise<void> }> {
  const real = process.env.OPENAI_BASE_URL;
  if (real) {
    return { baseUrl: real, apiKey: process.env.OPENAI_API_KEY ?? "", name: process.env.MODEL ?? "gpt-4o-mini", stop: async () => undefined };
  }
  const scripted = await new ScriptedModel().start();
  return { baseUrl: scripted.baseUrl, apiKey: "none", name: "scripted", stop: () => scripted.stop() };
}
