"""The embedded PostgreSQL stops with the command that started it, and only then."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.db.embedded import is_running, start_embedded, stop_embedded
from tests.support.processes import REPO, Server

pytestmark = pytest.mark.slow


def _serve(tmp_path: Path) -> Server:
    env = {"CONTEXTD_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(tmp_path)}
    server = Server(None, env)
    server.wait_ready(timeout=150)
    r = httpx.post(
        server.base_url + "/sessions/emb/messages",
        json={"messages": [{"role": "user", "content": "hi", "id": "u1"}]},
        timeout=30,
    )
    assert r.status_code in (200, 201), r.text
    return server


def test_ctrl_c_stops_the_embedded_postgres_serve_started(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = _serve(tmp_path)
    try:
        assert is_running(data)
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(60) in (0, -signal.SIGINT), server.log_text()[-3000:]
        server.stop()
        assert not is_running(data), server.log_text()[-3000:]
        # The data stays: the next serve finds the session.
        server = _serve(tmp_path)
        log = httpx.get(server.base_url + "/sessions/emb/messages", timeout=30).json()
        assert [m["id"] for m in log["messages"]] == ["u1"]
    finally:
        server.stop()
        if is_running(data):
            stop_embedded(data)


def test_a_server_already_running_is_left_running(tmp_path: Path) -> None:
    data = tmp_path / "data"
    start_embedded(data)
    try:
        server = _serve(tmp_path)
        server.stop(signal.SIGTERM)
        assert server.proc.returncode in (0, -signal.SIGTERM), server.log_text()[-3000:]
        assert is_running(data)
        done = subprocess.run(
            [sys.executable, "-m", "app.db.embedded", "stop", str(data)],
            cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert not is_running(data)
    finally:
        if is_running(data):
            stop_embedded(data)
