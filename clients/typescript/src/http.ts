/**
 * One typed request over the generated `paths`: the path, query, body and answer of
 * every call are the schema's own, so a new endpoint is one small method in
 * client.ts, and an API change that breaks a method fails `tsc`. Below, what each
 * attempt needs: the default headers, its abort signal, a wait a stop can end.
 */
import type { paths } from "./generated/openapi.js";

export type Method = "get" | "put" | "post" | "delete";
export type PathOf<M extends Method> = { [P in keyof paths]: paths[P][M] extends undefined ? never : P }[keyof paths];
export type Op<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type Json<R> = R extends { content: { "application/json": infer J } } ? J : undefined;
type SuccessCode = 200 | 201 | 202 | 204;
/** The answer of an operation: the union of its 2xx JSON bodies (undefined for 204). */
export type Answer<O> = O extends { responses: infer R } ? { [K in keyof R & SuccessCode]: Json<R[K]> }[keyof R & SuccessCode] : never;
export type BodyOf<O> = O extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;
export type QueryOf<O> = O extends { parameters: { query?: infer Q } } ? Q : never;
export type PathParamsOf<O> = O extends { parameters: { path?: infer Q } } ? Q : never;

/** Everything the sender needs to know about one call. */
export type Call<P extends keyof paths, M extends Method> = {
  method: M;
  path: P;
  params?: PathParamsOf<Op<P, M>>;
  query?: QueryOf<Op<P, M>>;
  body?: BodyOf<Op<P, M>>;
  /** Safe to send twice: retried after a transport error or a gateway's 502/504. */
  idempotent?: boolean;
  /**
   * An error status whose parsed body (undefined if it is not JSON) is an answer, not
   * an error: readyz's 503 "not ready", and not a gateway's 503 in front of it.
   */
  answers?: (status: number, body: unknown) => boolean;
  /** false: never retried, whatever the failure. */
  retried?: boolean;
  /** Seconds the server holds the answer back on purpose (a waiting compact): the attempt waits at least this long. */
  readTimeout?: number;
};

export function renderPath(template: string, params: Record<string, unknown> | undefined): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params?.[name];
    if (value === undefined || value === null) throw new TypeError(`missing path parameter ${name}`);
    return encodeSegment(String(value));
  });
}

function encodeSegment(value: string): string {
  // "." and ".." are valid session ids; percent-encoded they are not read as dot segments.
  if (/^\.+$/.test(value)) return value.replace(/\./g, "%2E");
  return encodeURIComponent(value);
}

export function renderQuery(query: Record<string, unknown> | undefined): string {
  if (!query) return "";
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue;
    search.append(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

/** Waits `seconds` unless `stop` is aborted first; true if it was. */
export function stoppedAfter(seconds: number, stop: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (stop.aborted) return resolve(true);
    const done = () => {
      clearTimeout(timer);
      stop.removeEventListener("abort", done);
      resolve(stop.aborted);
    };
    const timer = setTimeout(done, seconds * 1000);
    stop.addEventListener("abort", done, { once: true });
  });
}

/** The signal of one attempt, aborted by its timeout or by `stop`; `done()` once the body is read. */
export function attemptSignal(ms: number, stop: AbortSignal | undefined): { signal: AbortSignal; done: () => void } {
  const timeout = AbortSignal.timeout(ms);
  if (!stop) return { signal: timeout, done: () => undefined };
  const either = new AbortController();
  const abort = () => either.abort(stop.aborted ? stop.reason : timeout.reason);
  timeout.addEventListener("abort", abort);
  stop.addEventListener("abort", abort); // removed by done(): a lease's stop outlives many attempts
  if (stop.aborted) abort();
  const done = () => {
    timeout.removeEventListener("abort", abort);
    stop.removeEventListener("abort", abort);
  };
  return { signal: either.signal, done };
}

/** The default headers: names are case-insensitive, and a given `Authorization` wins over the key. */
export function defaultHeaders(apiKey: string | undefined, given: Record<string, string> | undefined): Record<string, string> {
  const out = new Headers({ accept: "application/json" });
  for (const [name, value] of Object.entries(given ?? {})) out.set(name, value);
  if (apiKey && !out.has("authorization")) out.set("authorization", `Bearer ${apiKey}`);
  const record: Record<string, string> = {};
  out.forEach((value, name) => (record[name] = value)); // lower-case names, one of each
  return record;
}

/** The JSON of an answer's text, or undefined if it is not JSON (a gateway's page). */
export function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
