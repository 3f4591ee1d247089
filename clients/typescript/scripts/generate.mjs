// `npm run generate`: regenerate src/generated/openapi.ts from the server's schema.
// With a URL argument (or CONTEXTD_OPENAPI_URL) the schema is read from a running
// server's /openapi.json; otherwise the repository's app builds it, no server needed.
import { writeFile } from "node:fs/promises";
import { GENERATED, render, schemaFromApp } from "./openapi.mjs";

const url = process.argv[2] || process.env.CONTEXTD_OPENAPI_URL;
let schema;
if (url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  schema = await response.json();
} else {
  schema = schemaFromApp();
}
await writeFile(GENERATED, await render(schema));
console.log(`wrote ${GENERATED}`);
