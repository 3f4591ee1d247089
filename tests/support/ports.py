"""Free TCP ports for the servers tests start, never the same one twice in a run.

The kernel's free port is free when asked, not when the server binds it later: under
pytest-xdist two workers can be handed the same one in between, and a server that
listens with SO_REUSEPORT (`serve --workers N`) would then share it silently. So when
`CONTEXTD_TEST_PORTS` names a file (tests/conftest.py creates one per run, on the xdist
controller, and the workers inherit it), every port handed out is recorded there under a
lock, and a recorded port is never handed out again.
"""

from __future__ import annotations

import fcntl
import os
import socket

ENV = "CONTEXTD_TEST_PORTS"


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port() -> int:
    registry = os.environ.get(ENV)
    if not registry:
        return _kernel_port()
    with open(registry, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
        f.seek(0)
        taken = {int(line) for line in f.read().split()}
        for _ in range(100):
            port = _kernel_port()
            if port not in taken:
                f.write(f"{port}\n")
                return port
    raise RuntimeError(f"no port the run has not handed out yet (registry {registry})")
