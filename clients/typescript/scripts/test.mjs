// `npm test` after the compile: starts one real contextd server for the run (the
// repository's `.venv/bin/contextd serve` on a free port), runs every compiled test
// file with Node's test runner against it, and stops the server.
//
// The database: with CONTEXTD_TEST_DATABASE_URL (a PostgreSQL server, as for the
// Python suite) a fresh database is created on it and dropped afterwards; without it
// the server starts its embedded PostgreSQL in a temporary folder.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { PACKAGE, REPO, python } from "./openapi.mjs";

const READY_TIMEOUT_MS = 120_000; // a start on a loaded 2-core machine can take tens of seconds

function admin(url, sql) {
  const code = [
    "import asyncio, sys, asyncpg",
    "from tests.support.databases import admin, plain_url",
    "asyncio.run(admin(plain_url(sys.argv[1]), sys.argv[2]))",
  ].join("\n");
  const run = spawnSync(python(), ["-c", code, url, sql], { cwd: REPO, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`${sql}: ${run.stderr}`);
}

function withDatabase(url, name) {
  const [head, query] = url.split("?", 2);
  return `${head.slice(0, head.lastIndexOf("/"))}/${name}${query ? `?${query}` : ""}`;
}

const tmp = mkdtempSync(path.join(os.tmpdir(), "contextd-ts-"));
const env = { ...process.env, CONTEXTD_LOG_FORMAT: "json", CONTEXTD_DATA_DIR: path.join(tmp, "data") };
delete env.CONTEXTD_API_KEYS;
let database;
const server = process.env.CONTEXTD_TEST_DATABASE_URL;
if (server) {
  database = `contextd_ts_${randomBytes(5).toString("hex")}`;
  admin(server, `CREATE DATABASE "${database}"`);
  env.CONTEXTD_DATABASE_URL = withDatabase(server, database);
} else {
  delete env.CONTEXTD_DATABASE_URL;
}

// Port 0: the server binds a free port itself and names it in its log. A port picked
// here and passed on is free only until someone else binds it, and the Python suite,
// which runs beside these tests, starts servers on ports it picks all the while: its
// server would then answer our /readyz and these tests.
const logPath = path.join(tmp, "contextd.log");
const contextd = process.env.CONTEXTD_BIN || path.join(REPO, ".venv/bin/contextd");
const child = spawn(contextd, ["serve", "--host", "127.0.0.1", "--port", "0", "--workers", "1"], {
  cwd: tmp,
  env,
  stdio: ["ignore", openSync(logPath, "w"), openSync(logPath, "a")],
});
let exited = false;
child.on("exit", () => (exited = true));

function stop() {
  if (!exited) child.kill("SIGTERM");
}

async function cleanup() {
  stop();
  await new Promise((resolve) => (exited ? resolve() : child.once("exit", resolve)));
  if (database) {
    admin(server, `DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  } else {
    const code = "import sys, pathlib\nfrom app.db.embedded import stop_embedded\nstop_embedded(pathlib.Path(sys.argv[1]))";
    spawnSync(python(), ["-c", code, path.join(tmp, "data")], { cwd: REPO });
  }
  rmSync(tmp, { recursive: true, force: true });
}

let code = 1;
try {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let baseUrl;
  for (;;) {
    if (exited) throw new Error(`contextd exited:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    const listening = /Uvicorn running on (http:\/\/127\.0\.0\.1:\d+)/.exec(readFileSync(logPath, "utf8"));
    if (listening) {
      baseUrl = listening[1];
      try {
        if ((await fetch(`${baseUrl}/readyz`)).status === 200) break;
      } catch {
        // not answering yet
      }
    }
    if (Date.now() > deadline) throw new Error(`contextd not ready:\n${readFileSync(logPath, "utf8").slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const dir = path.join(PACKAGE, ".build/test");
  const only = process.argv.slice(2);
  const files = only.length
    ? only.map((f) => path.join(dir, f.replace(/\.ts$/, ".js")))
    : readdirSync(dir).filter((f) => f.endsWith(".test.js")).sort().map((f) => path.join(dir, f));
  const run = spawnSync(process.execPath, ["--test", ...files], {
    stdio: "inherit",
    env: { ...process.env, CONTEXTD_TEST_URL: baseUrl },
  });
  code = run.status ?? 1;
  await new Promise((r) => setTimeout(r, 50)); // lets a pending exit event in
  if (exited) {
    console.error("contextd exited during the tests");
    code = 1;
  }
  if (code !== 0) {
    // What the server saw is the half of a failure the test's own message lacks.
    const lines = readFileSync(logPath, "utf8").split("\n");
    const trouble = lines.filter((l) => /"level": "(warning|error|critical)"|Traceback|Error/.test(l));
    console.error(`contextd's warnings and errors (last 40):\n${trouble.slice(-40).join("\n")}`);
    console.error(`contextd's log, its last lines:\n${lines.slice(-20).join("\n")}`);
  }
} catch (error) {
  console.error(error);
} finally {
  await cleanup();
}
process.exit(code);
