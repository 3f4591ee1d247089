"""Drive real `contextd serve` processes over TCP (SPEC §7)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url

from tests.support.processes import READY_TIMEOUT_S, REPO, Server


async def test_serve_answers_over_tcp_and_logs_json(start_server: Callable[..., Server]) -> None:
    server = start_server()
    async with httpx.AsyncClient(base_url=server.base_url) as c:
        r = await c.post(
            "/sessions/tcp-1/messages",
            json={"messages": [{"role": "user", "content": "over the wire", "id": "w-1"}]},
        )
        assert r.status_code in (200, 201), r.text
        assert r.headers["x-request-id"]
        log = (await c.get("/sessions/tcp-1/messages")).json()["messages"]
        assert [m["id"] for m in log][-1] == "w-1"
    lines = [json.loads(line) for line in server.log_text().splitlines() if line.startswith("{")]
    requests = [line for line in lines if line.get("event") == "request"]
    assert any(line["route"] == "/sessions/{session_id}/messages" for line in requests)
    assert any("loopback" in line.get("event", "") for line in lines)


async def test_two_servers_on_one_database_behave_as_one(
    start_server: Callable[..., Server],
) -> None:
    a, b = start_server(), start_server()
    sid = "two-servers"
    async with httpx.AsyncClient(timeout=30) as c:

        async def write(i: int) -> dict[str, int]:
            base = a.base_url if i % 2 else b.base_url
            r = await c.post(
                f"{base}/sessions/{sid}/messages",
                json={"messages": [{"role": "user", "content": f"m{i}", "id": f"m{i}"}]},
            )
            assert r.status_code == 201, r.text
            return {r.json()["messages"][0]["id"]: r.json()["messages"][0]["seq"]}

        acks = await asyncio.gather(*(write(i) for i in range(40)))
        log = (await c.get(f"{a.base_url}/sessions/{sid}/messages?limit=1000")).json()["messages"]
    assert [m["seq"] for m in log] == list(range(1, 41))
    assert {m["id"]: m["seq"] for m in log} == {k: v for d in acks for k, v in d.items()}


async def test_sigkill_during_appends_loses_no_acknowledged_write(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    sid = "killed-server"
    acked: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=server.base_url, timeout=5) as c:

        async def writer(w: int) -> None:
            for i in range(1000):
                try:
                    r = await c.post(
                        f"/sessions/{sid}/messages",
                        json={"messages": [{"role": "user", "content": "x", "id": f"{w}-{i}"}]},
                    )
                except httpx.TransportError:
                    return
                if r.status_code in (200, 201):
                    acked.update({a["id"]: a["seq"] for a in r.json()["messages"]})

        tasks = [asyncio.create_task(writer(w)) for w in range(4)]
        for _ in range(300):  # kill mid-stream, once writes are flowing
            if len(acked) >= 20:
                break
            await asyncio.sleep(0.02)
        server.proc.send_signal(signal.SIGKILL)
        await asyncio.gather(*tasks)
    assert len(acked) > 10
    restarted = start_server()
    async with httpx.AsyncClient(base_url=restarted.base_url) as c:
        log = (await c.get(f"/sessions/{sid}/messages?limit=1000")).json()["messages"]
    stored = {m["id"]: m["seq"] for m in log}
    # Every acknowledged write is there, with its seq; the log is gap-free.
    assert all(stored.get(k) == v for k, v in acked.items())
    assert [m["seq"] for m in log] == list(range(1, len(log) + 1))


def test_port_zero_takes_a_free_port_and_names_it_in_the_log(
    database_url: str, tmp_path: Path
) -> None:
    # What a harness beside other tests uses (the TypeScript client's): a port picked
    # first and passed on can be taken by another server before this one binds it.
    log_path = tmp_path / "serve.log"
    env = {**os.environ, "CONTEXTD_DATABASE_URL": database_url, "CONTEXTD_LOG_FORMAT": "json"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", "0", "--workers", "1"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            port = _wait_for_port(proc, log_path)
            assert port != 8080
            assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200
            lines = [json.loads(x) for x in log_path.read_text().splitlines() if x.startswith("{")]
            assert all(line.get("port") != 0 for line in lines)  # no log names port 0
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


def test_a_port_out_of_range_is_refused_naming_the_option() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--port", "70000"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--port" in done.stderr and "65535" in done.stderr


def _wait_for_port(proc: subprocess.Popen[bytes], log_path: Path) -> int:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log_path.read_text()[-3000:]}")
        found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", log_path.read_text())
        if found:
            return int(found.group(1))
        time.sleep(0.1)
    raise TimeoutError(log_path.read_text()[-3000:])


def _refused(*args: str, env: dict[str, str] | None = None) -> str:
    """The command's stderr; it must end with status 2 and no traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO, env={**os.environ, **(env or {})}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


def test_bad_arguments_and_settings_are_refused_in_one_line(database_url: str) -> None:
    assert "--port" in _refused("serve", "--port", "abc")
    assert "65535" in _refused("worker", "--port", "99999")  # before any database work
    assert "--tenant" in _refused("keys", "create", "--tenant", "")
    assert "--tenant" in _refused("keys", "list", "--tenant", " acme")
    assert "CONTEXTD_JOB_LEASE_S" in _refused("migrate", env={"CONTEXTD_JOB_LEASE_S": "inf"})
    bad_level = _refused("migrate", env={"CONTEXTD_LOG_LEVEL": "LOUD"})
    assert "CONTEXTD_LOG_LEVEL" in bad_level
    assert "CONTEXTD_DATABASE_URL" in _refused(
        "migrate", env={"CONTEXTD_DATABASE_URL": "mysql://x/y"}
    )
    missing = (
        make_url(database_url)
        .set(database="no_such_database_here")
        .render_as_string(hide_password=False)
    )
    err = _refused("keys", "list", env={"CONTEXTD_DATABASE_URL": missing})
    assert "cannot use the database" in err and "no_such_database_here" in err


def test_an_api_key_list_with_no_key_in_it_leaves_the_server_on_loopback(
    database_url: str, tmp_path: Path
) -> None:
    # "," parses to no key at all: the server must not take it for keys and bind 0.0.0.0.
    log_path = tmp_path / "serve.log"
    env = {
        **os.environ,
        "CONTEXTD_DATABASE_URL": database_url,
        "CONTEXTD_LOG_FORMAT": "json",
        "CONTEXTD_API_KEYS": ",",
    }
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--host", "0.0.0.0", "--port", "0",
             "--workers", "1"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            _wait_for_port(proc, log_path)
            assert "refusing to bind beyond loopback" in log_path.read_text()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
