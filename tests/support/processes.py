"""A real `contextd serve` (or `worker`) process over TCP, and its log."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 120.0


class Server:
    def __init__(
        self,
        database_url: str | None,
        env: dict[str, str] | None = None,
        command: str = "serve",
        args: list[str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"contextd-{self.port}.log"
        full_env = {**os.environ, "CONTEXTD_LOG_FORMAT": "json"}
        if database_url is None:  # the embedded PostgreSQL
            full_env.pop("CONTEXTD_DATABASE_URL", None)
        else:
            full_env["CONTEXTD_DATABASE_URL"] = database_url
        full_env.update(env or {})
        if command == "serve" and not args:
            # One process unless a test asks for more: the default (one per core) would
            # multiply every process test's start-up time and memory.
            args = ["--workers", "1"]
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            # `worker` listens too: /healthz, /readyz and /metrics on --port.
            [sys.executable, "-m", "app.cli", command, "--port", str(self.port)] + (args or []),
            cwd=REPO,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    # Generous: a process start imports FastAPI, SQLAlchemy and the tokenizer, which took
    # 20-40 s on a 2-core machine at load average 10; a healthy quiet start takes ~2 s.
    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        # One client for every poll: a new one per poll builds an SSL context each time
        # (tens of ms of CPU), which a 2-core machine running the suite feels.
        with httpx.Client(base_url=self.base_url, timeout=1) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
                try:
                    if client.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        raise TimeoutError(f"server not ready: {self.log_path.read_text()[-3000:]}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()
