/**
 * What `withLease` runs beside the work: the renewals, and what a failed release does.
 *
 * Leaving ends the renewal in flight (its request and the waits of its retries are
 * aborted), so nothing of a renewal outlives the work: no request after the release,
 * no timer holding the process. A release that fails is reported to `onReleaseError`
 * (by default a `console.warn`), never thrown: throwing would replace the work's own
 * error, or fail work that is done, and the lease expires by its TTL anyway.
 */
import { ContextdError, TransportError } from "./errors.js";
import type { Lease } from "./types.js";

/** The lease `withLease` hands its work; `lost` is set when a renewal was refused. */
export type HeldLease = Lease & { lost?: ContextdError };

/** The default `onReleaseError`: a warning, naming the session and when the lease runs out. */
export function warnReleaseFailed(sessionId: string, held: HeldLease, error: ContextdError): void {
  console.warn(
    `contextd: could not release the lease on session ${JSON.stringify(sessionId)} ` +
      `(${error.name}: ${error.message}); it expires by its TTL, at ${held.expires_at}`,
  );
}

/** Renews `held` every `intervalS` seconds, one renewal at a time, until `end()`. */
export class Renewal {
  private readonly stop = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly held: HeldLease,
    private readonly renew: (stop: AbortSignal) => Promise<Lease>,
    private readonly intervalS: number,
  ) {
    this.schedule();
  }

  end(): void {
    clearTimeout(this.timer);
    this.stop.abort();
  }

  private schedule(): void {
    this.timer = setTimeout(() => void this.tick(), this.intervalS * 1000);
    this.timer.unref?.();
  }

  private async tick(): Promise<void> {
    try {
      this.held.expires_at = (await this.renew(this.stop.signal)).expires_at;
    } catch (error) {
      if (this.stop.signal.aborted) return; // after the work, a refusal is our own release
      if (!(error instanceof TransportError)) {
        this.held.lost = error instanceof ContextdError ? error : new ContextdError(String(error));
        return;
      }
      // no answer: the next tick tries again, while the lease lives
    }
    if (!this.stop.signal.aborted) this.schedule();
  }
}
