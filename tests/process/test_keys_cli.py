"""`contextd keys` against a real database, and a real server that never logs a key."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import httpx

from tests.support.processes import REPO, Server


def _cli(url: str, *args: str) -> str:
    env = {**os.environ, "CONTEXTD_DATABASE_URL": url, "CONTEXTD_LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_keys_cli_and_a_keyed_server(make_database: Callable[[], str]) -> None:
    url = make_database()
    out = _cli(url, "create", "--tenant", "acme", "--name", "ci")
    key = next(line.split()[-1] for line in out.splitlines() if line.startswith("key:"))
    key_id = next(line.split()[-1] for line in out.splitlines() if line.startswith("id:"))
    assert key.startswith("ctxd_")
    listed = _cli(url, "list")
    assert key_id in listed and "acme" in listed and key not in listed

    server = Server(url, {"CONTEXTD_HOST": "0.0.0.0"})
    try:
        server.wait_ready()
        async with httpx.AsyncClient(base_url=server.base_url) as c:
            assert (await c.get("/sessions")).status_code == 401
            r = await c.post(
                "/sessions/k1/messages",
                json={"messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert r.status_code == 201
            r = await c.get("/sessions/k1", headers={"Authorization": "Bearer not-the-key"})
            assert r.status_code == 401
        log = server.log_text()
        assert "loopback only" not in log  # keys exist: the requested host is honoured
        assert key not in log and key[5:20] not in log
    finally:
        server.stop()
    assert "revoked" in _cli(url, "revoke", key_id)
    assert "revoked" in _cli(url, "list")
