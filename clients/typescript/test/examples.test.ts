import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { contextdUrl } from "./support/server.js";

// Each example as a user runs it: its own process, the scripted model, a real contextd.
for (const name of ["ai-sdk", "agents-sdk", "langchain"]) {
  test(`examples/${name}.ts runs a tool-using agent end to end`, () => {
    const script = fileURLToPath(new URL(`../examples/${name}.js`, import.meta.url));
    const env: NodeJS.ProcessEnv = { ...process.env, CONTEXTD_URL: contextdUrl() };
    delete env.OPENAI_BASE_URL;
    const run = spawnSync(process.execPath, [script], { env, encoding: "utf8", timeout: 60_000 });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /answer: The file says: Ship the TypeScript client on Friday\./);
    const roles = [...run.stdout.matchAll(/#\d+ (\w+):/g)].map((m) => m[1]);
    assert.deepEqual(roles, ["user", "assistant", "tool", "assistant"]);
  });
}
