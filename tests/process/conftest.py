"""Real `contextd serve` processes over TCP, against the test database."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.support.processes import READY_TIMEOUT_S, Server


@pytest.fixture
def start_server(database_url: str) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(
        env: dict[str, str] | None = None,
        command: str = "serve",
        args: list[str] | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
    ) -> Server:
        server = Server(database_url, env, command, args)
        servers.append(server)
        if command == "serve":
            server.wait_ready(ready_timeout)
        return server

    yield start
    for s in servers:
        s.stop()
