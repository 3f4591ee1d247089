"""Helpers shared by the benchmarks: statistics, tables, throwaway databases, seeding.

Everything here talks to 127.0.0.1 (or a Unix socket of the embedded server)
only. A benchmark creates its own database, never touches an existing one, and
drops it when it ends, even after an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx

if TYPE_CHECKING:
    from app.compaction.model_client import ChatModelClient, ChatResult

# Re-exported: the benches import these from here.
from tests.support.databases import admin as admin
from tests.support.databases import plain_url as plain_url
from tests.support.databases import with_database as with_database
from tests.support.dataset import DATASET as DATASET
from tests.support.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
# Without the dataset file (tests/support/dataset.py says where) the benches fall back to
# a synthetic dialogue, a different load.


def dataset_warning() -> str:
    """A header line for benches that fall back to the synthetic dialogue ("" with the
    dataset): a different load, whose figures must not pass for the dataset's."""
    if DATASET.exists():
        return ""
    return (
        f"\nWARNING: dataset {DATASET} not found (in a worktree, set CONTEXTD_DATASET): "
        "these figures are from a synthetic dialogue, not comparable with the dataset's"
    )


# --- statistics and output -------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0..100) with linear interpolation between ranks, like numpy."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table, columns padded so it also reads well in a terminal."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: list[str]) -> str:
        pairs = enumerate(zip(r, widths, strict=True))
        return "| " + " | ".join(v.rjust(w) if i else v.ljust(w) for i, (v, w) in pairs) + " |"

    rule = "|".join("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(widths))
    return "\n".join([line(cells[0]), f"|{rule}|", *map(line, cells[1:])])


def _cell(v: object) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def expect(r: httpx.Response, *statuses: int) -> None:
    """A RuntimeError unless the answer has one of `statuses` (its body is not parsed:
    timed code calls it)."""
    if r.status_code not in statuses:
        raise RuntimeError(
            f"{r.request.method} {r.request.url.path}: HTTP {r.status_code} {r.text[:300]}"
        )


def check(r: httpx.Response, *statuses: int) -> Any:
    """The answer's JSON, after `expect`."""
    expect(r, *statuses)
    return r.json()


def load_average() -> str:
    with contextlib.suppress(OSError):
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "n/a"


def machine_info() -> str:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for text in Path("/proc/cpuinfo").read_text().splitlines():
            if text.startswith("model name"):
                cpu = text.split(":", 1)[1].strip()
                break
    return (
        f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


# --- URLs and throwaway databases --------------------------------------------------------------


async def server_version(url: str) -> str:
    conn = await asyncpg.connect(plain_url(url), timeout=30)
    try:
        return str(await conn.fetchval("SHOW server_version"))
    finally:
        await conn.close()


def parser(doc: str | None, database: bool = True) -> argparse.ArgumentParser:
    """A bench's command line: its docstring as the help, and with `database`, where its
    throwaway database goes (`database_server`)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    if database:
        p.add_argument("--database-url", help="PostgreSQL server for the throwaway database")
        p.add_argument("--embedded", action="store_true", help="an embedded PostgreSQL even if set")
    return p


def ints(text: str) -> list[int]:
    """A comma-separated list of integers (`1000,10_000`), as an argparse type."""
    return [int(x.replace("_", "")) for x in text.split(",") if x.strip()]


def database_server(args: argparse.Namespace) -> str | None:
    """`--database-url`, else CONTEXTD_DATABASE_URL; None (an embedded server) with
    `--embedded` or neither."""
    if getattr(args, "embedded", False):
        return None
    return args.database_url or os.environ.get("CONTEXTD_DATABASE_URL")


@dataclass(frozen=True, slots=True)
class Throwaway:
    url: str  # the fresh database, asyncpg spelling
    server: str  # "embedded PostgreSQL (...)" or the redacted server URL


@contextlib.contextmanager
def throwaway_database(
    server_url: str | None, prefix: str = "contextd_bench"
) -> Iterator[Throwaway]:
    """Create `<prefix>_<random>` on `server_url` (or on a fresh embedded server) and drop it after.

    Synchronous on purpose: call it before starting an event loop, so migrations
    (Alembic runs its own loop) can run in the same thread.
    """
    tmp: Path | None = None
    if server_url:
        from app.cli_args import redacted

        base = plain_url(server_url)
        where = redacted(base)
    else:
        from app.db.embedded import start_embedded

        tmp = Path(tempfile.mkdtemp(prefix="contextd-bench-"))
        base = plain_url(start_embedded(tmp))
        where = f"embedded PostgreSQL in {tmp}"
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    asyncio.run(admin(base, f'CREATE DATABASE "{name}"'))
    try:
        yield Throwaway(with_database(base, name), where)
    finally:
        with contextlib.suppress(Exception):
            asyncio.run(admin(base, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        if tmp is not None:
            from app.db.embedded import stop_embedded

            stop_embedded(tmp)
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def migrated_database(
    args: argparse.Namespace, prefix: str = "contextd_bench"
) -> Iterator[Throwaway]:
    """`throwaway_database` on the server `args` names, migrated to head."""
    from app.db.migrate import run_migrations

    with throwaway_database(database_server(args), prefix) as db:
        run_migrations(db.url)
        yield db


@contextlib.asynccontextmanager
async def app_client(url: str, **settings: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """The app on `url` in this process, under its lifespan, and a client of it through
    httpx's ASGI transport (no network). `settings` go over these: no model, no API key
    (whatever the environment says), logs of warnings only, so stdout holds the tables.
    The app is the second item (its `state`: the runner, the database, the caches)."""
    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    configure_logging("json", "WARNING")
    unset = {"llm_base_url": None, "llm_model": None, "llm_api_key": None, "api_keys": None}
    app = create_app(load_settings(**{"database_url": url, **unset, **settings}), database_url=url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=120
        ) as c:
            yield c, app


class Recorder:
    """A model client (the runner's), delegated, with each answer and the wall time of
    each `complete` call kept."""

    def __init__(self, inner: ChatModelClient) -> None:
        self.inner = inner
        self.answers: list[ChatResult] = []
        self.seconds: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, *args: Any, **kwargs: Any) -> ChatResult:
        started = time.perf_counter()
        try:
            result = await self.inner.complete(*args, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - started)
        self.answers.append(result)
        return result


# --- a real server process ---------------------------------------------------------------------


async def stop(proc: asyncio.subprocess.Process) -> None:
    """Terminate `proc`, then kill it if it is still there after 15 s."""
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 15)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def served(
    cmd: Sequence[str],
    ready_url: str,
    timeout_s: float = 60,
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
) -> AsyncIterator[None]:
    """Run the server `cmd`, its output in `log_path` (kept)
    or a temporary file, until `ready_url` answers 200; stop it at the end."""
    kept = log_path is not None
    if log_path is None:
        log, name = tempfile.mkstemp(prefix="contextd-bench-", suffix=".log")
        log_path = Path(name)
    else:
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, cwd=tempfile.gettempdir(), stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=2) as probe:
            while True:
                if proc.returncode is not None:
                    raise RuntimeError(f"{cmd[:4]} exited {proc.returncode}:\n{_tail(log_path)}")
                with contextlib.suppress(httpx.TransportError):
                    if (await probe.get(ready_url)).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{cmd[:4]} not ready in {timeout_s}s:\n{_tail(log_path)}")
                await asyncio.sleep(0.1)
        yield
    finally:
        await stop(proc)
        os.close(log)
        if not kept:
            log_path.unlink(missing_ok=True)


@contextlib.asynccontextmanager
async def contextd_server(
    database_url: str,
    timeout_s: float = 60,
    workers: int = 1,
    env_extra: Mapping[str, str] | None = None,
    log_path: Path | None = None,
) -> AsyncIterator[str]:
    """`contextd serve` (the same entry point users run) on a free loopback port, with
    `env_extra` in its environment; yields the base URL once /readyz answers 200."""
    port = free_port()
    env = {**os.environ, "CONTEXTD_DATABASE_URL": database_url, "CONTEXTD_HOST": "127.0.0.1"}
    env.pop("CONTEXTD_API_KEYS", None)
    env.update(env_extra or {})
    # The code of this checkout, not whatever `app` the interpreter has installed (a
    # git worktree sharing another checkout's venv runs that checkout's otherwise).
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    cmd += ["--workers", str(workers)]
    async with served(cmd, f"{base}/readyz", timeout_s, env, log_path):
        yield base


def _tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


# --- reading a log back ---------------------------------------------------------------------


async def get_json(
    client: httpx.AsyncClient, url: str, params: dict[str, Any] | None = None
) -> dict[str, Any]:
    """GET with the retries any client needs (transport errors, 503), bounded."""
    for attempt in range(8):
        try:
            r = await client.get(url, params=params)
        except httpx.TransportError:
            await asyncio.sleep(min(0.1 * 2**attempt, 2.0))
            continue
        if r.status_code == 503:
            await asyncio.sleep(min(float(r.headers.get("retry-after", "1")), 2.0))
            continue
        r.raise_for_status()
        return dict(r.json())
    raise RuntimeError(f"GET {url} failed 8 times")


async def read_log(client: httpx.AsyncClient, base: str, sid: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    for _ in range(10_000):
        url = f"{base}/sessions/{sid}/messages"
        page = await get_json(client, url, {"after_seq": after, "limit": 1000})
        out.extend(page["messages"])
        if page["next_after_seq"] is None:
            return out
        after = int(page["next_after_seq"])
    raise RuntimeError(f"{sid}: the log never ended")


# --- realistic messages and seeding ------------------------------------------------------------


def load_messages(path: Path = DATASET) -> list[dict[str, Any]]:
    """Every message of the shared dataset, sessions one after another (tool groups stay whole),
    tool-call ids unique across the whole list.

    Falls back to a synthetic user/assistant dialogue when the file is absent.
    """
    if not path.exists():
        return [
            {"role": "user", "content": f"Question {i}: how do I make the build reproducible?"}
            if i % 2 == 0
            else {
                "role": "assistant",
                "content": f"Answer {i}: pin every dependency, record the toolchain version, "
                "and build from a clean checkout in CI. " * 3,
            }
            for i in range(200)
        ]
    out: list[dict[str, Any]] = []
    for k, session in enumerate(dataset_sessions(path)):
        # Call ids are unique within a dataset session only: qualify them.
        messages = session["messages"]
        out.extend(with_unique_ids(m, f"s{k}") for m in messages if m.get("role") != "system")
    return out


def dataset_sessions(path: Path = DATASET) -> list[dict[str, Any]]:
    """The sessions of a dataset file (JSON lines), in file order."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def squash(text: str) -> str:
    """`text` with each run of white space made one space."""
    return " ".join(text.split())


def cycled(messages: Sequence[dict[str, Any]], count: int, salt: str) -> Iterator[dict[str, Any]]:
    """`count` messages cycling through `messages`, tool-call ids made unique per cycle."""
    i = 0
    cycle = 0
    while i < count:
        for m in messages:
            if i >= count:
                return
            yield with_unique_ids(m, f"{salt}{cycle}")
            i += 1
        cycle += 1


def with_unique_ids(m: dict[str, Any], suffix: str) -> dict[str, Any]:
    """`m` with `_<suffix>` appended to its tool-call ids (a copy when it has any)."""
    if "tool_calls" not in m and "tool_call_id" not in m:
        return m
    m = copy.deepcopy(m)
    for call in m.get("tool_calls") or []:
        call["id"] = f"{call['id']}_{suffix}"
    if m.get("tool_call_id"):
        m["tool_call_id"] = f"{m['tool_call_id']}_{suffix}"
    return m


async def set_statistics(url: str, mode: str) -> None:
    """`analyze`: ANALYZE now, as autovacuum eventually would (the steady state). `none`: no
    statistics, and autovacuum off for this database's tables, so plans stay those of a
    freshly loaded table for the whole run (what a new deployment sees before autovacuum)."""
    conn = await asyncpg.connect(plain_url(url), timeout=30)
    try:
        tables = [
            r["tablename"]
            for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            )
        ]
        for t in tables:
            if mode == "analyze":
                await conn.execute(f'ANALYZE "{t}"')
            else:
                await conn.execute(f'ALTER TABLE "{t}" SET (autovacuum_enabled = false)')
    finally:
        await conn.close()


# --- a lean HTTP/1.1 client for load generators ---------------------------------------------


@dataclass
class Reply:
    """An answer of RawHttp."""

    status_code: int
    headers: dict[str, str]
    content: bytes

    def json(self) -> Any:
        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class HttpError(Exception):
    """The connection failed or the answer was not HTTP/1.1 we can read: a transport error."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = type(cause).__name__


class RawHttp:
    """Keep-alive HTTP/1.1 connections on raw asyncio streams, one per server, a request
    at a time on each.

    A load generator shares the cores with the server it measures, so its CPU per
    request is taken from the server's: httpcore cost ~0.7 ms per request under
    bench/load.py, about a sixth of the machine; this costs a fraction of that. It
    reads what contextd sends (Content-Length bodies); anything else, a reset or a
    timeout closes the connection and raises HttpError, and the next request
    connects afresh.
    """

    def __init__(self, timeout_s: float, headers: Mapping[str, str] | None = None) -> None:
        self.timeout_s = timeout_s
        # Sent with every request (e.g. one tenant's Authorization).
        self._extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._streams: dict[tuple[str, int], tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}

    async def request(
        self, method: str, host: str, port: int, path: str, body: bytes | None = None
    ) -> Reply:
        """The answer (its headers' names in lower case)."""
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self._exchange(method, host, port, path, body)
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            self._drop((host, port))
            raise HttpError(e) from e

    async def _exchange(
        self, method: str, host: str, port: int, path: str, body: bytes | None
    ) -> Reply:
        key = (host, port)
        streams = self._streams.get(key)
        if streams is None:
            streams = self._streams[key] = await asyncio.open_connection(host, port)
        reader, writer = streams
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n{self._extra}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        writer.write(head.encode() + b"\r\n" + (body or b""))
        lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.lower()] = value.strip()
        if "content-length" not in headers:
            raise ValueError(f"no Content-Length in the answer ({status})")
        content = await reader.readexactly(int(headers["content-length"]))
        if headers.get("connection", "").lower() == "close":
            self._drop(key)
        return Reply(status, headers, content)

    def _drop(self, key: tuple[str, int]) -> None:
        streams = self._streams.pop(key, None)
        if streams is not None:
            streams[1].close()

    def close(self) -> None:
        for key in list(self._streams):
            self._drop(key)


def use_uvloop() -> None:
    """uvloop for this process's event loops, when installed (it comes with uvicorn[standard])."""
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
