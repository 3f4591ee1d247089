"""`contextd worker`: compaction jobs in a process of their own.

Beside the job loop the worker serves `/healthz`, `/readyz` and `/metrics` on
its own port (`CONTEXTD_WORKER_PORT`, `--port`), with the server's own
handlers (app/api/health.py), and heartbeats in `compaction_workers` so that a
server in "auto" mode leaves the queue to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable, Iterator

import structlog
import uvicorn
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.errors import install_error_handlers
from app.api.health import router as health_router
from app.auth.keys import Keyring, parse_env_keys
from app.auth.middleware import Authenticate
from app.compaction import repository as repo
from app.compaction.configured_model import model_client
from app.compaction.runner import CompactionRunner
from app.core.settings import Settings
from app.db import engine as database
from app.db.database import Database

log = structlog.get_logger("contextd.worker")


def run_worker(settings: Settings, url: str, port: int | None = None) -> int:
    return asyncio.run(_main(settings, url, settings.worker_port if port is None else port))


def probe_app(engine: AsyncEngine, settings: Settings) -> FastAPI:
    """The worker's HTTP side: health, readiness (database and schema) and metrics,
    behind the server's keys (SPEC §8: only the health probes are open) and answering
    errors as problem+json, as the server does."""
    app = FastAPI(title="contextd worker", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.engine = engine
    app.include_router(health_router)
    install_error_handlers(app)
    keyring = Keyring(
        parse_env_keys(settings.api_keys.get_secret_value()) if settings.api_keys else {}
    )
    keyring.engine = engine
    app.add_middleware(Authenticate, keyring=keyring)
    return app


class _ProbeServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The worker owns SIGTERM/SIGINT: it stops its jobs first, then this server.
        yield


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def _main(settings: Settings, url: str, port: int) -> int:
    try:
        sock = _listen(settings.host, port)
    except OSError as exc:
        # Before anything else runs: a worker nobody can probe is one nobody can watch.
        log.error("cannot listen for probes", host=settings.host, port=port, error=str(exc))
        return 2
    # One connection per job loop, plus lease renewals, the heartbeat and the probes.
    engine = database.create_engine(url, pool_size=settings.compaction_workers + 3)
    db = Database(database.session_factory(engine))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    probes = _ProbeServer(
        uvicorn.Config(
            probe_app(engine, settings),
            log_config=None,
            access_log=False,
            lifespan="off",
            workers=1,
        )
    )
    probe_task = asyncio.create_task(probes.serve(sockets=[sock]), name="worker-probes")
    try:
        async with model_client(settings) as client:
            runner = CompactionRunner(db, settings, client)
            beat = asyncio.create_task(_heartbeat(db, runner.worker_id), name="worker-heartbeat")
            listen = asyncio.create_task(_wake_on_jobs(engine, runner.wake), name="worker-listen")
            runner.start()
            log.info(
                "worker started",
                worker=runner.worker_id,
                model=settings.llm_model,
                probes=f"{settings.host}:{sock.getsockname()[1]}",
            )
            await stop.wait()
            await runner.stop()
            for task in (beat, listen):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            # Gone at once, not after WORKER_STALE_S: servers in "auto" mode resume now.
            try:
                async with db.transaction() as s:
                    await repo.worker_gone(s, runner.worker_id)
            except Exception as exc:
                log.warning("could not deregister the worker", error=type(exc).__name__)
    finally:
        probes.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await probe_task
        sock.close()
        await engine.dispose()
    log.info("worker stopped")
    return 0


async def _heartbeat(db: Database, worker: str) -> None:
    while True:
        try:
            async with db.transaction() as s:
                await repo.worker_heartbeat(s, worker)
        except Exception as exc:  # the database is away: jobs fail over by lease anyway
            log.warning("worker heartbeat failed", error=type(exc).__name__)
        await asyncio.sleep(repo.WORKER_HEARTBEAT_S)


async def _wake_on_jobs(
    engine: AsyncEngine, wake: Callable[[], None], listening: asyncio.Event | None = None
) -> None:
    """Wake the job loops when any process queues a job (NOTIFY from request_job).

    One pooled connection LISTENs for the worker's life. While it is down (database
    restart) the loops still poll every second, and this retries every few seconds.
    """

    def on_notify(*_: object) -> None:
        wake()

    while True:
        try:
            async with engine.connect() as conn:
                driver = (await conn.get_raw_connection()).driver_connection
                if driver is None:  # only a detached connection has none
                    raise RuntimeError("no asyncpg connection to LISTEN on")
                closed = asyncio.Event()
                driver.add_termination_listener(lambda *_, ev=closed: ev.set())
                await driver.add_listener(repo.JOBS_CHANNEL, on_notify)
                if listening is not None:
                    listening.set()
                try:
                    await closed.wait()
                finally:
                    if not driver.is_closed():
                        await driver.remove_listener(repo.JOBS_CHANNEL, on_notify)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("job notifications unavailable; polling", error=type(exc).__name__)
        if listening is not None:
            listening.clear()
        await asyncio.sleep(repo.WORKER_HEARTBEAT_S)
