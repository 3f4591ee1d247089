/**
 * The `prefix_id` echo: each payload stream's last `prefix_id`, sent back on its next
 * call as `previous_prefix_id`, so `usage.stable_prefix_tokens` is exact (without it
 * the server guesses that the previous call lacked only the newest step). A stream is
 * the session and the parameters that shape a payload's selection or rendering.
 */
import type { ContextOptions } from "./types.js";

/** undefined: echo the stream's last id (the default); a string: send it; null: send none. */
export type PreviousPrefix = string | null | undefined;

const MAX_STREAMS = 4096; // enough for every stream a long-lived process keeps calling

export class PrefixMemory {
  private readonly ids = new Map<string, string>();

  constructor(readonly enabled = true) {}

  static key(sessionId: string, options: ContextOptions): string {
    // The server's defaults are the same stream as leaving a parameter out.
    return JSON.stringify([
      sessionId,
      options.format ?? "openai",
      options.reserve_output_tokens ?? 0,
      options.max_tokens ?? null,
      options.strategy ?? null,
      options.mode ?? null,
      options.preview_limit_tokens ?? null,
    ]);
  }

  resolve(key: string, given: PreviousPrefix): string | null {
    if (given !== undefined) return given;
    if (!this.enabled) return null;
    return this.ids.get(key) ?? null;
  }

  remember(key: string, prefixId: string | null): void {
    if (!this.enabled) return;
    this.ids.delete(key);
    if (prefixId === null) return;
    this.ids.set(key, prefixId); // re-inserted: the newest last
    while (this.ids.size > MAX_STREAMS) {
      const oldest = this.ids.keys().next().value;
      if (oldest === undefined) break;
      this.ids.delete(oldest);
    }
  }

  /** The session's log was rewritten or removed: its payloads are no one's prefix. */
  forget(sessionId: string): void {
    for (const key of [...this.ids.keys()]) {
      if ((JSON.parse(key) as unknown[])[0] === sessionId) this.ids.delete(key);
    }
  }
}
