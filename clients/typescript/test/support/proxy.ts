/**
 * A proxy in front of contextd that can lose answers: `loseNext(n, match)` sends the
 * next n matching requests on to the server, lets the server store what they asked,
 * then cuts the connection instead of answering, as a network would. `answerNext`
 * answers matching requests itself (a 503 with Retry-After, say) without reaching the
 * server. `delayNext` holds the server's answer to matching requests back for a
 * while (a slow gateway). Every request that reached the proxy is in `seen`, with its
 * headers.
 */
import {
  createServer,
  request,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import { contextdUrl } from "./server.js";

export type Seen = { method: string; path: string; body: string; headers: IncomingHttpHeaders };
type Match = (seen: Seen) => boolean;

export class LossyProxy {
  readonly seen: Seen[] = [];
  private lose: { n: number; match: Match } = { n: 0, match: () => false };
  private delay: { n: number; match: Match; ms: number } = { n: 0, match: () => false, ms: 0 };
  private canned: { n: number; match: Match; status: number; headers: Record<string, string>; body: string } | undefined;
  private server: Server | undefined;
  baseUrl = "";

  constructor(private readonly target: string) {}

  async start(): Promise<this> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve));
    this.baseUrl = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }

  loseNext(n: number, match: Match): void {
    this.lose = { n, match };
  }

  delayNext(n: number, match: Match, ms: number): void {
    this.delay = { n, match, ms };
  }

  answerNext(n: number, match: Match, status: number, headers: Record<string, string> = {}, body = ""): void {
    this.canned = { n, match, status, headers, body };
  }

  /** The requests that matched, as the proxy saw them. */
  matching(match: Match): Seen[] {
    return this.seen.filter(match);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const seen = { method: req.method ?? "GET", path: req.url ?? "/", body: body.toString("utf8"), headers: req.headers };
    this.seen.push(seen);
    if (this.canned && this.canned.n > 0 && this.canned.match(seen)) {
      this.canned.n--;
      res.writeHead(this.canned.status, { "content-type": "application/problem+json", ...this.canned.headers });
      res.end(this.canned.body);
      return;
    }
    const url = new URL(seen.path, this.target);
    const headers = { ...req.headers, host: url.host };
    const upstream = request(url, { method: seen.method, headers }, (answer) => {
      const parts: Buffer[] = [];
      answer.on("data", (part: Buffer) => parts.push(part));
      answer.on("end", async () => {
        if (this.delay.n > 0 && this.delay.match(seen)) {
          this.delay.n--;
          await new Promise((r) => setTimeout(r, this.delay.ms));
        }
        if (this.lose.n > 0 && this.lose.match(seen)) {
          this.lose.n--;
          res.socket?.destroy(); // the server has stored it; the client sees a reset
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.end(Buffer.concat(parts));
      });
    });
    upstream.on("error", () => res.socket?.destroy());
    upstream.end(body);
  }
}

/** `run` with a proxy in front of the test server, stopped afterwards whatever happens. */
export async function withProxy(run: (proxy: LossyProxy) => Promise<void>): Promise<void> {
  const proxy = await new LossyProxy(contextdUrl()).start();
  try {
    await run(proxy);
  } finally {
    await proxy.stop();
  }
}
