"""Load: many simulated agents against real `contextd serve` processes, then a checker.

    python bench/load.py [--agents 10,50,200] [--duration 20] [--servers 1|2] [--workers N]
                         [--database-url URL]

For each agent count: a throwaway database (bench/common.py), the fake model of
`tests/support/fakellm.py` in its own process, 1 or 2 `contextd serve` on loopback; every agent
owns a session that compacts as it writes, and loops like a tool-using agent (its
payload, then a tool step, sometimes the answer and the next user message), retrying
a 503, 5xx or transport error with the same message ids. A closed loop: no model time
between requests, so the figures are a saturated server's. Every payload is checked
against SPEC §3; after the run the compactions drain and a checker reads every log back
(acknowledged ids stored once at their seqs, gap-free seqs, consistent compaction
state) and the server logs are scanned for errors. The steps and checks in full:
docs/reliability.md ("Load"). Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

if __package__ in (None, ""):  # `python bench/load.py`: make `bench` and `app` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    REPO_ROOT,
    HttpError,
    RawHttp,
    Reply,
    contextd_server,
    get_json,
    ints,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    percentile,
    plain_url,
    progress,
    read_log,
    stop,
    use_uvloop,
)
from tests.support.tail import tail_violation

# A session small enough that compactions happen within seconds of writing.
# Usable budget 4000 - 256 - 64 = 3680 tokens, compaction from 90% of it; the seeded
# history (SEED_TURNS short turns, unmeasured) starts each agent a little below that.
SESSION_SETTINGS: dict[str, Any] = {
    "context_limit": 4000,
    "auto_compact": True,
    "system_prompt": "You are a careful coding agent. Never touch the migrations.",
    "compaction": {
        "reserved_output_tokens": 256,
        "safety_margin_tokens": 64,
        "min_preserved_turns": 2,
    },
}
SEED_TURNS = 5
SEED_CHARS = 500
STRATEGIES = ("key_messages", "sliding_window", "summary")
MAX_ATTEMPTS = 8  # per request, then the agent gives up (and says so)
# Longer than the server's own waits (its connection pool gives up after 30 s), so a
# request that the server ends is counted by the status it ended with.
REQUEST_TIMEOUT_S = 60.0
THIS_FILE = Path(__file__).resolve()
MAX_TURNS = 400  # per agent
DRAIN_S = 60  # wait for the compactions after the load
POOL_SIZE = 10  # CONTEXTD_DB_POOL_SIZE per server
MAX_SECONDS = 1800  # the whole run: the agent counts left are skipped after
MARKER = re.compile(r"^\[(a\d+-m\d+)\]")


# --- measurements ------------------------------------------------------------------------------


@dataclass
class Stats:
    context_ms: list[float] = field(default_factory=list)
    append_ms: list[float] = field(default_factory=list)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    violations: list[str] = field(default_factory=list)
    acked_messages: int = 0
    append_requests: int = 0
    replays: int = 0
    contexts: int = 0
    contexts_with_summary: int = 0
    over_budget: int = 0
    abandoned_agents: int = 0

    def violation(self, agent: str, text: str) -> None:
        self.violations.append(f"{agent}: {text}")


@dataclass
class Sent:
    """One message as the agent sent it, and the seq it was acknowledged at (None: never acked)."""

    id: str
    role: str
    digest: str
    seq: int | None = None


def digest(m: dict[str, Any]) -> str:
    keys = ("role", "content", "tool_calls", "tool_call_id")
    return hashlib.sha1(json.dumps([m.get(k) for k in keys], sort_keys=True).encode()).hexdigest()


# --- texts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Texts:
    user: list[str]
    assistant: list[str]
    tool: list[str]

    @classmethod
    def from_dataset(cls) -> Texts:
        by_role: dict[str, list[str]] = {"user": [], "assistant": [], "tool": []}
        for m in load_messages():
            content = m.get("content")
            if isinstance(content, str) and content.strip() and m["role"] in by_role:
                limit = 3000 if m["role"] == "tool" else 1200
                by_role[m["role"]].append(content[:limit])
        fallback = "Pin every dependency and build from a clean checkout. " * 4
        return cls(*(by_role[r] or [fallback] for r in ("user", "assistant", "tool")))


# --- one simulated agent -----------------------------------------------------------------------


class Agent:
    def __init__(self, n: int, run: str, ports: Sequence[int], texts: Texts, stats: Stats) -> None:
        self.n = n
        self.name = f"a{n}"
        self.sid = f"load-{run}-a{n}"
        self.ports = list(ports)
        self.http = RawHttp(REQUEST_TIMEOUT_S)  # why not httpx: RawHttp's docstring
        self.texts = texts
        self.stats = stats
        self.rng = random.Random(100_003 + n)
        self.strategy = STRATEGIES[n % len(STRATEGIES)]
        self.sent: dict[str, Sent] = {}  # every id ever sent, acked or not
        self.acked: list[Sent] = []  # in acknowledgement order
        self.seq_of_call: dict[str, int] = {}  # tool-call id -> seq of the assistant message
        self.seq_of_result: dict[str, int] = {}  # tool-call id -> seq of its tool message
        self.last_user_seq = 0
        self.summary_through = 0
        self.counter = 0
        self.seeding = False
        self.alive = True

    # -- HTTP with retries ------------------------------------------------------------

    async def request(
        self, kind: str, method: str, path: str, body: dict[str, Any] | None
    ) -> Reply | None:
        """The first 2xx answer, retrying 503/5xx/transport errors; None after giving up."""
        for attempt in range(MAX_ATTEMPTS):
            # Each request, retries included, to any of the servers: they must act as one.
            port = self.rng.choice(self.ports) if len(self.ports) > 1 else self.ports[0]
            content = None if body is None else json.dumps(body, separators=(",", ":")).encode()
            start = time.perf_counter()
            try:
                r = await self.http.request(method, "127.0.0.1", port, path, content)
            except HttpError as exc:
                self.stats.errors[f"{kind} {exc.cause}"] += 1
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
                continue
            ms = (time.perf_counter() - start) * 1000
            if r.status_code < 300:
                if not self.seeding:
                    (self.stats.append_ms if kind == "append" else self.stats.context_ms).append(ms)
                return r
            self.stats.errors[f"{kind} {r.status_code}"] += 1
            if r.status_code == 503:
                retry_after = r.headers.get("retry-after")
                if retry_after is None:
                    self.stats.violation(self.name, f"503 without Retry-After on {kind}")
                await asyncio.sleep(min(float(retry_after or 1), 2.0))
            elif r.status_code >= 500:
                self.stats.violation(self.name, f"{kind} got {r.status_code}: {r.text[:200]}")
                await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
            else:  # every request of the agent is valid: a 4xx is a bug somewhere
                self.stats.violation(self.name, f"{kind} got {r.status_code}: {r.text[:300]}")
                return None
        return None

    # -- building messages --------------------------------------------------------------

    def _next_id(self) -> str:
        self.counter += 1
        return f"{self.name}-m{self.counter}"

    def _text(self, mid: str, pool: list[str]) -> str:
        text = self.rng.choice(pool)
        return f"[{mid}] {text[:SEED_CHARS] if self.seeding else text}"

    def user_message(self) -> dict[str, Any]:
        mid = self._next_id()
        return {"role": "user", "id": mid, "content": self._text(mid, self.texts.user)}

    def assistant_text(self) -> dict[str, Any]:
        mid = self._next_id()
        text = self._text(mid, self.texts.assistant)
        return {"role": "assistant", "id": mid, "content": text}

    def tool_step(self) -> list[dict[str, Any]]:
        """An assistant message calling 1-3 tools, and one tool message answering each call."""
        mid = self._next_id()
        calls = [f"{self.name}c{self.counter}x{i}" for i in range(self.rng.choice((1, 1, 2, 3)))]
        out: list[dict[str, Any]] = [
            {
                "role": "assistant",
                "id": mid,
                "content": None,
                "tool_calls": [
                    {
                        "id": c,
                        "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": c})},
                    }
                    for c in calls
                ],
            }
        ]
        for c in calls:
            rid = self._next_id()
            text = self._text(rid, self.texts.tool)
            # Now and then an output far over the preview limit.
            if not self.seeding and self.rng.random() < 0.05:
                text += "\n" + "0123456789 abcdefghij " * 400
            out.append({"role": "tool", "id": rid, "tool_call_id": c, "content": text})
        return out

    # -- the two calls ------------------------------------------------------------------

    async def append(self, messages: list[dict[str, Any]]) -> bool:
        for m in messages:
            self.sent[m["id"]] = Sent(m["id"], m["role"], digest(m))
        r = await self.request(
            "append", "POST", f"/sessions/{self.sid}/messages", {"messages": messages}
        )
        if r is None:
            return False
        acks = r.json()["messages"]
        if not self.seeding:
            self.stats.append_requests += 1
            self.stats.acked_messages += len(messages)
        if r.status_code == 200:
            self.stats.replays += 1  # an earlier attempt was stored; its seqs came back
        if [a["id"] for a in acks] != [m["id"] for m in messages]:
            self.stats.violation(self.name, f"ack ids {[a['id'] for a in acks]} differ")
            return False
        seqs = [int(a["seq"]) for a in acks]
        previous = self.acked[-1].seq if self.acked else 0
        assert previous is not None
        if seqs != list(range(previous + 1, previous + 1 + len(seqs))):
            self.stats.violation(self.name, f"acked seqs {seqs} do not follow {previous}")
        for m, seq in zip(messages, seqs, strict=True):
            sent = self.sent[m["id"]]
            sent.seq = seq
            self.acked.append(sent)
            if m["role"] == "user":
                self.last_user_seq = seq
            for c in m.get("tool_calls") or []:
                self.seq_of_call[c["id"]] = seq
            if m["role"] == "tool":
                self.seq_of_result[m["tool_call_id"]] = seq
        return True

    async def context(self) -> bool:
        body = {
            "strategy": self.strategy,
            "dynamic_context": [f"Task of {self.name}: keep the build green."],
        }
        r = await self.request("context", "POST", f"/sessions/{self.sid}/context", body)
        if r is None:
            return False
        self.stats.contexts += 1
        self.check_payload(r.json())
        return True

    # -- invariants of one payload (SPEC §3) ---------------------------------------------

    def check_payload(self, ctx: dict[str, Any]) -> None:
        bad = self.stats.violation
        who = self.name
        seqs: list[int] = []
        calls_seen: set[str] = set()
        calls_open: set[str] = set()
        for m in ctx["messages"]:
            role = m.get("role")
            if role == "system":
                continue
            if role == "assistant" and m.get("tool_calls"):
                ids = [c["id"] for c in m["tool_calls"]]
                seq = self.seq_of_call.get(ids[0])
                calls_seen.update(ids)
                calls_open.update(ids)
            elif role == "tool":
                call = m.get("tool_call_id")
                seq = self.seq_of_result.get(call or "")
                if call not in calls_seen:
                    bad(who, f"tool message for {call} without its call before it")
                calls_open.discard(call or "")
            else:
                match = MARKER.match(m.get("content") if isinstance(m.get("content"), str) else "")
                sent = self.sent.get(match.group(1)) if match else None
                seq = sent.seq if sent else None
            if seq is None:
                bad(who, f"payload message not from this session's log: {str(m)[:120]}")
                continue
            seqs.append(seq)
        if calls_open:
            bad(who, f"tool calls without their results: {sorted(calls_open)}")
        if seqs != sorted(set(seqs)):
            bad(who, f"payload out of log order: {seqs}")
        if seqs != list(ctx["kept_seqs"]):
            bad(who, f"payload seqs {seqs} != kept_seqs {ctx['kept_seqs']}")
        if self.last_user_seq not in ctx["kept_seqs"]:
            bad(who, f"latest user message {self.last_user_seq} missing (kept {ctx['kept_seqs']})")
        usage = ctx["usage"]
        if ctx["over_budget"]:
            self.stats.over_budget += 1
        elif usage["input_tokens"] > usage["budget"]:
            bad(who, f"input_tokens {usage['input_tokens']} > budget {usage['budget']}")
        through = ctx["summary"]["through_seq"] if ctx["summary"]["included"] else None
        if through is not None:
            self.stats.contexts_with_summary += 1
            if through < self.summary_through:
                bad(who, f"summary went back from {self.summary_through} to {through}")
            self.summary_through = max(self.summary_through, through)
            # Only the turn anchor (the latest user message) may be sent from under the
            # summary: the watermark may reach inside the current turn (SPEC §5).
            if any(s <= through and s != self.last_user_seq for s in ctx["kept_seqs"]):
                bad(who, f"kept seqs under the summary's {through}: {ctx['kept_seqs']}")

    # -- the loop -----------------------------------------------------------------------

    async def seed(self) -> None:
        """Settings and a few short turns, unmeasured: the run starts near the threshold."""
        self.seeding = True
        messages = [self.user_message()]
        for _ in range(SEED_TURNS):
            messages += [*self.tool_step(), self.assistant_text(), self.user_message()]
        ok = await self.request("setup", "PUT", f"/sessions/{self.sid}", SESSION_SETTINGS)
        self.alive = bool(ok) and await self.append(messages)
        self.seeding = False

    async def run(self, deadline: float) -> None:
        ok = self.alive
        turns = 0
        while ok and time.monotonic() < deadline and turns < MAX_TURNS:
            ok = await self.context() and await self.append(self.tool_step())
            if ok and self.rng.random() < 0.4:  # the model answers; the user says the next thing
                ok = await self.context()
                ok = ok and await self.append([self.assistant_text(), self.user_message()])
                turns += 1
        if not ok:
            self.alive = False
            self.stats.abandoned_agents += 1


# --- the checker -------------------------------------------------------------------------------


@dataclass
class CheckResult:
    sessions: int = 0
    messages: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


async def check_agent(
    client: httpx.AsyncClient, base: str, agent: Agent, result: CheckResult
) -> None:
    bad = result.problems.append
    who = agent.name
    log = await read_log(client, base, agent.sid)
    result.sessions += 1
    result.messages += len(log)
    seqs = [int(m["seq"]) for m in log]
    if seqs != list(range(1, len(log) + 1)):
        bad(f"{who}: seqs are not gap-free 1..{len(log)}")
    stored: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for m in log:
        stored[m["id"]].append(m)
    for mid, copies in stored.items():
        sent = agent.sent.get(mid)
        if sent is None:
            bad(f"{who}: stored id {mid} was never sent")
        elif len(copies) != 1:
            bad(f"{who}: id {mid} stored {len(copies)} times")
        elif digest(copies[0]) != sent.digest:
            bad(f"{who}: id {mid} stored with other content than was sent")
    for sent in agent.acked:
        copies = stored.get(sent.id, [])
        if len(copies) != 1 or int(copies[0]["seq"]) != sent.seq:
            found = [c["seq"] for c in copies]
            bad(f"{who}: acked {sent.id}@{sent.seq} stored at {found}")
    acked_seqs = [s.seq or 0 for s in agent.acked]
    if acked_seqs != sorted(acked_seqs):  # per agent: log order is acknowledgement order
        bad(f"{who}: acknowledgement order differs from log order")
    state = await get_json(client, f"{base}/sessions/{agent.sid}/compaction")
    watermark = int(state["last_compaction_seq"] or 0)
    if why := tail_violation(log, watermark):
        bad(f"{who}: {why}")
    if bool(state["summary"]["text"]) != (watermark > 0):
        bad(f"{who}: summary present={bool(state['summary']['text'])} with watermark {watermark}")
    if watermark < agent.summary_through:
        bad(f"{who}: watermark {watermark} behind a summary served ({agent.summary_through})")
    active = [j["job_id"] for j in state["jobs"] if j["status"] in ("pending", "running")]
    if active:
        bad(f"{who}: jobs still active after the drain: {active}")


async def drain_jobs(url: str, timeout_s: float) -> int:
    """Wait until no compaction job is pending or running; returns how many still are."""
    conn = await asyncpg.connect(plain_url(url), timeout=30)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            active = int(
                await conn.fetchval(
                    "SELECT count(*) FROM compaction_jobs WHERE status IN ('pending', 'running')"
                )
            )
            if active == 0 or time.monotonic() > deadline:
                return active
            await asyncio.sleep(0.25)
    finally:
        await conn.close()


async def job_counts(url: str) -> tuple[dict[str, int], list[str]]:
    """Jobs by status, and why the first few degraded or failed ones did."""
    conn = await asyncpg.connect(plain_url(url), timeout=30)
    try:
        rows = await conn.fetch("SELECT status, count(*) AS n FROM compaction_jobs GROUP BY status")
        noops = await conn.fetch(
            "SELECT result->>'reason' AS reason, count(*) AS n FROM compaction_jobs "
            "WHERE status = 'noop' GROUP BY 1 ORDER BY 2 DESC"
        )
        bad = await conn.fetch(
            "SELECT session_id, status, reason, result::text AS result FROM compaction_jobs "
            "WHERE status IN ('degraded', 'failed') ORDER BY created_at LIMIT 10"
        )
    finally:
        await conn.close()
    why = []
    for r in bad:
        result = json.loads(r["result"] or "{}")
        detail = {
            k: v for k, v in result.items() if any(w in k for w in ("reason", "error", "anchor"))
        }
        why.append(f"{r['session_id']}: {r['status']} {r['reason'] or ''} {detail}")
    if noops:
        why.append("noop reasons: " + ", ".join(f"{r['reason']} {r['n']}" for r in noops))
    return {str(r["status"]): int(r["n"]) for r in rows}, why


# --- processes ---------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def fake_llm_process() -> AsyncIterator[str]:
    """`tests/support/fakellm.py` in its own process (not sharing the agents' event loop)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(THIS_FILE),
        "--serve-fake-llm",
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line:
            raise RuntimeError("the fake model did not start")
        yield line.decode().strip()
    finally:
        await stop(proc)


async def serve_fake_llm() -> None:
    from tests.support.fakellm import FakeLLM

    async with FakeLLM(behaviour="normal") as llm:
        print(llm.base_url, flush=True)
        loop = asyncio.get_running_loop()
        # Runs until the parent closes our stdin (or terminates us).
        await loop.run_in_executor(None, sys.stdin.read)


def server_log_problems(path: Path) -> list[str]:
    """What a JSON server log reports as a 500 or an error, one line per record.

    A request logged with status 500 names its route; an error record names its
    event and the last line of its traceback (the exception itself).
    """
    out = []
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                if "Traceback" in line:
                    out.append(f"{path.name}: {line[:300]}")
                continue
            if not isinstance(rec, dict):
                continue
            if rec.get("status") == 500:
                out.append(f"{path.name}: logged 500 on {rec.get('method')} {rec.get('route')}")
            elif rec.get("level") in ("error", "critical"):
                exc = str(rec.get("exception") or "").strip().splitlines()
                last = exc[-1] if exc else ""
                out.append(f"{path.name}: {str(rec.get('event')).strip()}: {last[:300]}")
    return out


# --- one level ---------------------------------------------------------------------------------


@dataclass
class Level:
    agents: int
    servers: int
    seconds: float
    generator_cpu_s: float
    stats: Stats
    check: CheckResult
    jobs: dict[str, int]
    job_problems: list[str]
    left_active: int
    log_problems: list[str]

    def row(self) -> list[object]:
        s = self.stats
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(s.errors.items())) or "0"
        jobs = "/".join(str(self.jobs.get(k, 0)) for k in ("success", "degraded", "failed", "noop"))
        requests = s.contexts + s.append_requests
        cpu_ms = self.generator_cpu_s * 1000 / requests if requests else math.nan
        return [
            self.agents, self.servers, requests / self.seconds, cpu_ms,
            s.acked_messages / self.seconds, s.append_requests / self.seconds,
            s.contexts / self.seconds, percentile(s.context_ms, 50), percentile(s.context_ms, 99),
            percentile(s.append_ms, 50), percentile(s.append_ms, 99), errors, len(s.violations),
            jobs, s.contexts_with_summary, len(self.log_problems),
            "ok" if self.check.ok and not self.left_active else "FAILED",
        ]  # fmt: skip


HEADERS = (
    "agents", "servers", "achieved req/s", "generator CPU ms/req", "appends/s (msgs)",
    "append req/s", "context req/s", "context p50 ms", "context p99 ms", "append p50 ms",
    "append p99 ms", "errors", "invariant violations", "compactions ok/degraded/failed/noop",
    "payloads with summary", "server log errors", "checker",
)  # fmt: skip


async def run_level(
    args: argparse.Namespace, url: str, agents: int, texts: Texts, run: str
) -> Level:
    stats = Stats()
    async with fake_llm_process() as llm_url:
        env = {
            "CONTEXTD_LLM_BASE_URL": llm_url,
            "CONTEXTD_LLM_MODEL": "fake-summariser",
            "CONTEXTD_LOG_FORMAT": "json",
            "CONTEXTD_DB_POOL_SIZE": str(POOL_SIZE),
        }
        tmp = Path(tempfile.gettempdir())
        logs = [tmp / f"contextd-load-{run}-{i}.log" for i in range(args.servers)]
        async with contextlib.AsyncExitStack() as stack:
            bases = [
                await stack.enter_async_context(
                    contextd_server(url, 180, args.workers, env, log_path=log)
                )
                for log in logs
            ]
            client = await stack.enter_async_context(httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S))
            ports = [int(b.rsplit(":", 1)[1]) for b in bases]
            crew = [Agent(n, run, ports, texts, stats) for n in range(agents)]
            for a in crew:
                stack.callback(a.http.close)
            sem = asyncio.Semaphore(16)

            async def seeded(a: Agent) -> None:
                async with sem:
                    await a.seed()

            await asyncio.gather(*(seeded(a) for a in crew))
            progress(f"  {agents} agents: sessions seeded; {args.duration:.0f}s of load")
            start = time.monotonic()
            cpu_start = time.process_time()
            deadline = start + args.duration
            await asyncio.gather(*(a.run(deadline) for a in crew))
            seconds = time.monotonic() - start
            generator_cpu_s = time.process_time() - cpu_start
            progress(f"  {agents} agents: load done in {seconds:.1f}s; draining compactions")
            left_active = await drain_jobs(url, DRAIN_S)
            check = CheckResult()

            async def checked(a: Agent) -> None:
                async with sem:
                    await check_agent(client, bases[a.n % len(bases)], a, check)

            await asyncio.gather(*(checked(a) for a in crew))
            jobs, job_problems = await job_counts(url)
        log_problems = [p for log in logs for p in server_log_problems(log)]
    return Level(agents, args.servers, seconds, generator_cpu_s, stats, check, jobs,
                 job_problems, left_active, log_problems)  # fmt: skip


# --- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument("--agents", type=ints, default="10,50,200", help="agent counts")
    p.add_argument("--duration", type=float, default=20, help="seconds of load per agent count")
    p.add_argument("--servers", type=int, choices=(1, 2), default=1, help="contextd servers")
    p.add_argument("--workers", type=int, default=1, help="`serve --workers` of each server")
    p.add_argument("--serve-fake-llm", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_fake_llm:
        asyncio.run(serve_fake_llm())
        return 0
    use_uvloop()  # the generator's own loop: it shares the cores with the server
    texts = Texts.from_dataset()
    levels: list[Level] = []
    budget_end = time.monotonic() + MAX_SECONDS
    for agents in args.agents:
        remaining = budget_end - time.monotonic()
        if remaining <= 0:
            progress(f"{MAX_SECONDS} s reached; skipping {agents} agents")
            break
        with migrated_database(args, prefix="contextd_load") as db:
            progress(f"{agents} agents, {args.servers} server(s), database on {db.server}")
            run = f"{agents}x{args.servers}"
            level = asyncio.run(
                asyncio.wait_for(run_level(args, db.url, agents, texts, run), remaining)
            )
        levels.append(level)
        report_level(level)
    print()
    print(f"machine: {machine_info()}; load average after: {load_average()}")
    print(
        f"duration {args.duration:.0f}s per row; {args.servers} contextd server(s),"
        f" serve --workers {args.workers} each; closed loop"
    )
    print()
    print(markdown_table(HEADERS, [lv.row() for lv in levels]))
    failed = any(not lv.check.ok or lv.stats.violations or lv.log_problems for lv in levels)
    return 1 if failed else 0


def report_level(level: Level) -> None:
    s = level.stats
    progress(
        f"  {level.agents} agents: {s.acked_messages} messages acked in {s.append_requests} "
        f"appends ({s.replays} replays), {s.contexts} contexts, "
        f"{s.abandoned_agents} agents gave up, jobs {level.jobs}, "
        f"still active after drain {level.left_active}"
    )
    progress(
        f"  checker: {level.check.sessions} sessions, {level.check.messages} messages, "
        f"{len(level.check.problems)} problems; {len(s.violations)} payload violations; "
        f"{len(level.log_problems)} server log errors"
    )
    for text in (level.check.problems + s.violations)[:20]:
        progress(f"    ! {text[:600]}")
    for text, n in collections.Counter(level.log_problems).most_common(10):
        progress(f"    ! server log, {n}x: {text}")
    for text in level.job_problems:
        progress(f"    ~ {text[:600]}")


if __name__ == "__main__":
    sys.exit(main())
