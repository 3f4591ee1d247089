/**
 * One typed request over the generated `paths`: the path, query, body and answer of
 * every call are the schema's own, so a new endpoint is one small method in
 * client.ts, and an API change that breaks a method fails `tsc`.
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
  /** Statuses besides 2xx that are answers, not errors (readyz's 503 "not ready"). */
  answers?: number[];
  /** false: never retried, whatever the failure. */
  retried?: boolean;
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
