"""The database wait's schedule and bound, against a port where nothing listens
(a refused connection is immediate), on a fake clock: no real sleeping."""

from __future__ import annotations

import itertools
import socket

import pytest
from structlog.testing import capture_logs

from app.db.wait import MAX_PAUSE_S, DatabaseUnreachable, pauses, wait_for_database


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://nobody:secret@127.0.0.1:{port}/nothing"


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_pauses_double_up_to_a_cap() -> None:
    assert list(itertools.islice(pauses(), 7)) == [0.5, 1, 2, 4, 8, 8, 8]
    assert max(itertools.islice(pauses(), 50)) == MAX_PAUSE_S


def test_a_database_that_never_comes_ends_the_wait_with_the_last_error() -> None:
    clock = FakeClock()
    with capture_logs() as logs, pytest.raises(DatabaseUnreachable) as raised:
        wait_for_database(_closed_port_url(), 20, sleep=clock.sleep, clock=clock)
    # The last pause is cut to what is left of the wait: never past it.
    assert clock.slept == [0.5, 1, 2, 4, 8, 4.5]
    assert "not reachable after 20s" in str(raised.value)
    assert "ConnectionRefusedError" in str(raised.value)
    said = [e["event"] for e in logs]
    assert said[:2] == [
        "database not reachable yet, retrying in 0.5s",
        "database not reachable yet, retrying in 1s",
    ]
    assert len(said) == len(clock.slept)
    assert "secret" not in str(raised.value) + repr(logs)


def test_no_wait_fails_at_the_first_refusal() -> None:
    clock = FakeClock()
    with pytest.raises(DatabaseUnreachable, match="after 0s"):
        wait_for_database(_closed_port_url(), 0, sleep=clock.sleep, clock=clock)
    assert clock.slept == []


def test_a_reachable_database_returns_at_once(database_url: str) -> None:
    clock = FakeClock()
    wait_for_database(database_url, 60, sleep=clock.sleep, clock=clock)
    assert clock.slept == []


def test_a_missing_database_is_not_waited_for(database_url: str) -> None:
    # Reachable but without that database: the migration step says so, at once.
    from sqlalchemy.engine import make_url

    url = make_url(database_url).set(database="no_such_database_here")
    clock = FakeClock()
    wait_for_database(url.render_as_string(hide_password=False), 60, sleep=clock.sleep, clock=clock)
    assert clock.slept == []
