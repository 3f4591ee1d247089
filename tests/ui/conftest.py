"""The console in a real headless Chromium (Debian's `chromium`, driven by Playwright).

The app with two tenants' keys and an in-process compaction runner, served over
HTTP by uvicorn in a thread, on a fresh database, seeded through the API. Screenshots land in .artifacts/ui/ (gitignored; CI keeps them).
Without a chromium the tests skip, except where CONTEXTD_REQUIRE_BROWSER is set
(.ci/run sets it after installing chromium): there they fail instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.support.console_data import Seeded, seed
from tests.support.console_ui import KEY_A, KEY_B, ConsoleServer

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def chromium() -> str:
    path = chromium_path()
    missing = None
    if path is None:
        missing = "chromium is not installed (apt-get install chromium; .ci/run does)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is not installed (the dev extra has it)"
    if missing:
        if os.environ.get("CONTEXTD_REQUIRE_BROWSER"):
            pytest.fail(missing)
        pytest.skip(missing)
    assert path is not None
    return path


@pytest.fixture(scope="module")
def console_server(chromium: str, make_database: Callable[[], str]) -> Iterator[ConsoleServer]:
    server = ConsoleServer(make_database())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def seeded(console_server: ConsoleServer) -> Seeded:
    with httpx.Client(
        base_url=console_server.base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30
    ) as c:
        out = seed(c)
    with httpx.Client(
        base_url=console_server.base_url, headers={"Authorization": f"Bearer {KEY_B}"}, timeout=30
    ) as c:
        c.put("/sessions/bravo-only", json={}).raise_for_status()
    return out


@pytest.fixture(scope="module")
def browser(chromium: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh tab (fresh sessionStorage); the page's errors fail the test."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.set_default_timeout(10_000)
    try:
        yield tab
    finally:
        context.close()
    # 401s are how a wrong key is told; the browser logs each failed fetch. A test that
    # provokes another refusal on purpose names its status in `expected_console_errors`.
    told = ("401", "404", *getattr(request.node, "expected_console_errors", ()))
    real = [e for e in errors if not any(code in e for code in told)]
    assert not real, real
