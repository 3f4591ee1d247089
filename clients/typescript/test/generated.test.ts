import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { test } from "node:test";
import { contextdUrl } from "./support/server.js";

test("src/generated/openapi.ts is exactly what the running server's /openapi.json generates", async () => {
  const response = await fetch(`${contextdUrl()}/openapi.json`);
  assert.equal(response.status, 200);
  // The generator `npm run generate` runs (a plain .mjs script), from the compiled test in .build/test.
  const script = new URL("../../scripts/openapi.mjs", import.meta.url).href;
  const { GENERATED, render } = (await import(script)) as { GENERATED: string; render: (schema: unknown) => Promise<string> };
  const fresh = await render(await response.json());
  const stored = await readFile(GENERATED, "utf8");
  // On a mismatch: `npm run generate` in clients/typescript, then review the diff.
  assert.ok(fresh === stored, "src/generated/openapi.ts is stale: run `npm run generate` in clients/typescript");
});
