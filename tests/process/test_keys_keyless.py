"""`contextd keys keyless`: the way back to keyless mode on a local database that keeps
the data (revoking the last key locks everyone out on purpose: a revoked key still
counts). It asks first; a server running meanwhile stays keyed until it restarts."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable

import httpx

from app.auth.keys import Keyring, create_key
from app.db import engine as database
from tests.support.processes import REPO, Server


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTEXTD_DATABASE_URL": url, "CONTEXTD_LOG_FORMAT": "json"}
    env.pop("CONTEXTD_API_KEYS", None)
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


async def test_keyless_after_the_last_key_was_revoked(make_database: Callable[[], str]) -> None:
    url = make_database()
    out = _cli(url, "create", "--tenant", "default").stdout
    key = next(line.split()[-1] for line in out.splitlines() if line.startswith("key:"))
    key_id = next(line.split()[-1] for line in out.splitlines() if line.startswith("id:"))
    server = Server(url)
    try:
        server.wait_ready()
        async with httpx.AsyncClient(base_url=server.base_url) as c:
            auth = {"Authorization": f"Bearer {key}"}
            body = {"messages": [{"role": "user", "content": "kept"}]}
            assert (await c.post("/sessions/k1/messages", json=body, headers=auth)).is_success
    finally:
        server.stop()
    assert _cli(url, "revoke", key_id).returncode == 0

    asked = _cli(url, "keyless")
    assert asked.returncode == 1 and "--yes" in asked.stdout and "1 API keys" in asked.stdout
    assert "revoked" in _cli(url, "list").stdout  # asking deleted nothing
    done = _cli(url, "keyless", "--yes")
    assert done.returncode == 0 and "deleted 1 keys (0 active)" in done.stdout, done
    assert _cli(url, "list").stdout.strip() == ""

    server = Server(url)
    try:
        server.wait_ready()
        assert "loopback only" in server.log_text()
        async with httpx.AsyncClient(base_url=server.base_url) as c:
            log = (await c.get("/sessions/k1/messages")).json()["messages"]
            assert [m["content"] for m in log] == ["kept"]  # the data stayed
    finally:
        server.stop()


async def test_a_running_server_stays_keyed_when_every_key_is_deleted(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    engine = database.create_engine(url, pool_size=1)
    keyring = Keyring({})
    keyring.engine = engine
    try:
        async with database.session_factory(engine)() as s, s.begin():
            await create_key(s, "t")
        assert await keyring.enabled()
        done = await asyncio.to_thread(_cli, url, "keyless", "--yes")
        assert done.returncode == 0, done.stderr
        keyring._enabled = (0.0, True)  # the cache expired: the next request asks again
        assert await keyring.enabled(), "a running server must not open up"
        fresh = Keyring({})
        fresh.engine = engine
        assert not await fresh.enabled()  # the next start is keyless
    finally:
        await engine.dispose()
