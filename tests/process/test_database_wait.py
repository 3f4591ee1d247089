"""`serve` and `worker` wait for a database that is not up yet (SPEC §7), bounded.

The database "comes up later" as a TCP forwarder to the test database that starts
listening on the server's database port only once the server has said it is waiting:
every step waits on an event (a log line, a readiness answer, an exit), never on a
clock, so a loaded machine makes the test slower, not red.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import URL, make_url

from tests.support.ports import free_port
from tests.support.processes import REPO, Server

WAITING = "database not reachable yet, retrying in"
LOG_TIMEOUT_S = 120.0


def _moved(real: URL, port: int) -> str:
    """The test database's URL, but over TCP on loopback at `port`."""
    query = {k: v for k, v in real.query.items() if k != "host"}  # a Unix socket's folder
    return real.set(host="127.0.0.1", port=port, query=query).render_as_string(hide_password=False)


def _where(real: URL) -> tuple[socket.AddressFamily, Any]:
    folder = real.query.get("host")
    if isinstance(folder, str) and folder.startswith("/"):
        return socket.AF_UNIX, f"{folder}/.s.PGSQL.{real.port or 5432}"
    return socket.AF_INET, (real.host or "127.0.0.1", real.port or 5432)


class Forwarder:
    """Listens on `port` and pipes every connection to the real database."""

    def __init__(self, port: int, real: URL) -> None:
        self.family, self.target = _where(real)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.closing = False
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.socket(self.family, socket.SOCK_STREAM)
            upstream.connect(self.target)
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.closing = True
        self.listener.close()
        for s in self.sockets:
            s.close()


def _wait_for_line(server: Server, needle: str) -> None:
    deadline = time.monotonic() + LOG_TIMEOUT_S
    while needle not in server.log_text():
        assert server.proc.poll() is None, f"exited: {server.log_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {needle!r}: {server.log_text()[-3000:]}"
        time.sleep(0.1)


@pytest.fixture
def later_port() -> Iterator[int]:
    yield free_port()


def test_serve_waits_for_a_database_that_comes_up_later(database_url: str, later_port: int) -> None:
    real = make_url(database_url)
    later = _moved(real, later_port)
    # A wait far longer than the test may take: the server must not give up first.
    server = Server(later, env={"CONTEXTD_DATABASE_WAIT_S": "3600"})
    forwarder = None
    try:
        _wait_for_line(server, WAITING)
        forwarder = Forwarder(later_port, real)
        server.wait_ready()
        events = [json.loads(line) for line in server.log_text().splitlines() if line[:1] == "{"]
        waits = [e for e in events if e["event"].startswith(WAITING)]
        assert waits and all("ConnectionRefusedError" in e["error"] for e in waits), waits
        assert any(e["event"] == "database reachable" for e in events)
        assert any(e["event"] == "schema at head" for e in events)  # then it migrated
    finally:
        server.stop()
        if forwarder is not None:
            forwarder.close()


def test_worker_gives_up_after_the_wait_with_a_clear_error(
    database_url: str, later_port: int, tmp_path: Path
) -> None:
    closed = _moved(make_url(database_url), later_port)
    env = {
        "PATH": "/usr/bin:/bin",
        "CONTEXTD_DATABASE_URL": closed,
        "CONTEXTD_DATABASE_WAIT_S": "2",
        "CONTEXTD_LOG_FORMAT": "json",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "worker", "--port", str(free_port())],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot use the database" in done.stderr and "not reachable after" in done.stderr
    assert f":{later_port}" in done.stderr and "Traceback" not in done.stderr
    assert WAITING in done.stdout + done.stderr
