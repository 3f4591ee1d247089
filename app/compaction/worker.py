"""`contextd worker`: compaction jobs in a process of their own."""

from __future__ import annotations

import asyncio
import signal

import structlog

from app import db as database
from app.api.deps import Database
from app.compaction.client import model_client
from app.compaction.runner import CompactionRunner
from app.settings import Settings

log = structlog.get_logger("contextd.worker")


def run_worker(settings: Settings, url: str) -> int:
    asyncio.run(_main(settings, url))
    return 0


async def _main(settings: Settings, url: str) -> None:
    engine = database.create_engine(url, pool_size=4)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with model_client(settings) as client:
        runner = CompactionRunner(Database(database.session_factory(engine)), settings, client)
        runner.start()
        log.info("worker started", worker=runner.worker_id, model=settings.llm_model)
        await stop.wait()
        await runner.stop()
    await engine.dispose()
    log.info("worker stopped")
