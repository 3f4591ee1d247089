"""A refused request leaves the keep-alive connection usable, over a real socket: a
lone surrogate in a JSON key made rendering the 422 fail, and uvicorn then dropped
the connection without `Connection: close` (issue 24)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable

from tests.support.processes import Server


def _request(sock: socket.socket, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    sock.sendall(head.encode() + body)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed; got {data!r}"
        data += chunk
    header, rest = data.split(b"\r\n\r\n", 1)
    lines = header.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        int(v)
        for k, _, v in (h.partition(": ") for h in lines[1:])
        if k.lower() == "content-length"
    )
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        rest += chunk
    assert not any(h.lower() == "connection: close" for h in lines), lines
    return status, rest[:length]


def test_a_surrogate_key_is_a_422_and_the_connection_stays_open(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    sid = f"ka-{uuid.uuid4().hex[:8]}"
    bad = b'{"messages": [{"role": "user", "content": "x", "metadata": {"k\\ud800": 1}}]}'
    key = b'{"k\\ud800": 1}'
    tools = (
        b'{"tools": [{"type": "function", "function": {"name": "f", "parameters": ' + key + b"}}]}"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        assert _request(sock, "PUT", f"/sessions/{sid}", b"{}")[0] == 201
        for method, path, body in (
            ("POST", f"/sessions/{sid}/messages", bad),
            ("PUT", f"/sessions/{sid}", key),
            ("POST", f"/sessions/{sid}/context", key),
            ("POST", f"/sessions/{sid}/context", tools),  # hashed into the prefix_id: a 500
            ("POST", f"/sessions/{sid}/budget", bad),
            ("POST", "/tokens/count", key),
        ):
            status, answer = _request(sock, method, path, body)
            assert status == 422, (path, answer)
            assert b'"code":"validation_error"' in answer.replace(b" ", b"")
        # The same connection still serves.
        status, _ = _request(sock, "GET", "/healthz")
        assert status == 200
    log = server.log_text()
    assert "Traceback" not in log and "unhandled error" not in log, log[-3000:]
