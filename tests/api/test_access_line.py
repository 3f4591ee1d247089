"""The access line rendered by app/observability/access.py is the line structlog's
JSON chain renders: same keys, same values, same level threshold."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from app.observability import access
from app.observability.logging import configure_logging


@pytest.fixture
def json_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    saved = structlog.get_config(), logging.getLogger().handlers[:], logging.getLogger().level
    configure_logging("json", "INFO")
    structlog.contextvars.bind_contextvars(request_id="r-1", session_id="s-1")
    yield stream
    structlog.contextvars.clear_contextvars()
    access.write_json_to(None)
    structlog.configure(**saved[0])
    logging.getLogger().handlers[:] = saved[1]
    logging.getLogger().setLevel(saved[2])


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_the_fast_line_is_the_chains_line(json_logging: io.StringIO) -> None:
    access.request("POST", "/sessions/{session_id}/messages", 201, 1.25)
    # What the line was before: structlog's processor chain through the stdlib handler.
    structlog.get_logger(access.LOGGER).info(
        "request", method="POST", route="/sessions/{session_id}/messages", status=201, ms=1.25
    )
    fast, chain = lines(json_logging)
    assert fast.pop("timestamp")[:16] == chain.pop("timestamp")[:16]
    assert fast == chain
    assert fast["request_id"] == "r-1" and fast["level"] == "info"


def test_the_fast_line_follows_the_level(json_logging: io.StringIO) -> None:
    logging.getLogger().setLevel(logging.WARNING)
    access.request("GET", "/sessions/{session_id}/context", 200, 3.0)
    assert json_logging.getvalue() == ""


def test_without_json_output_the_line_goes_through_structlog() -> None:
    access.write_json_to(None)
    captured = structlog.testing.LogCapture()
    saved = structlog.get_config()
    structlog.configure(processors=[captured])
    try:
        access.request("GET", "/healthz", 200, 0.5)
    finally:
        structlog.configure(**saved)  # the run's own setup (tests/conftest.py)
    assert captured.entries == [
        {
            "event": "request",
            "method": "GET",
            "route": "/healthz",
            "status": 200,
            "ms": 0.5,
            "log_level": "info",
        }
    ]
