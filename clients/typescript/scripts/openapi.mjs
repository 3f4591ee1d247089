// The server's /openapi.json -> src/generated/openapi.ts, shared by `npm run generate`
// and the test that regenerates the file and diffs it against the checked-in one.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import path from "node:path";
import openapiTS, { astToString } from "openapi-typescript";

export const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const REPO = path.resolve(PACKAGE, "../..");
export const GENERATED = path.join(PACKAGE, "src/generated/openapi.ts");

const HEADER = `/**
 * contextd's HTTP API as TypeScript types, generated from the server's /openapi.json
 * by openapi-typescript. Do not edit: run \`npm run generate\` after an API change.
 */

`;

/** The repository's Python, where the server's code is installed (`make .venv/.installed`). */
export function python() {
  return process.env.CONTEXTD_PYTHON || path.join(REPO, ".venv/bin/python");
}

/** The schema the server publishes, built by the server's own app factory (no database). */
export function schemaFromApp() {
  const code = [
    "import json, sys",
    "from app.main import create_app",
    "from app.core.settings import Settings",
    "json.dump(create_app(Settings()).openapi(), sys.stdout)",
  ].join("\n");
  const run = spawnSync(python(), ["-c", code], { cwd: REPO, encoding: "utf8", maxBuffer: 64 << 20 });
  if (run.status !== 0) {
    throw new Error(`could not build the schema with ${python()}: ${run.stderr || run.error}`);
  }
  return JSON.parse(run.stdout);
}

/** The TypeScript source for a schema (an object, as /openapi.json parses). */
export async function render(schema) {
  const ast = await openapiTS(schema, { alphabetize: true, defaultNonNullable: false });
  return HEADER + astToString(ast);
}
