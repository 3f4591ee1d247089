"""The console in a real headless Chromium (Debian's `chromium`, driven by Playwright).

One `contextd serve` process with two tenants' keys, on a fresh database, seeded
through the API. Screenshots land in .artifacts/ui/ (gitignored; CI keeps them).
Without a chromium the tests skip, except where CONTEXTD_REQUIRE_BROWSER is set
(.ci/run sets it after installing chromium): there they fail instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.process.conftest import Server
from tests.support.console_data import Seeded, seed

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".artifacts" / "ui"
KEY_A = "ctxd_console-test-key-alpha"
KEY_B = "ctxd_console-test-key-bravo"
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
def console_server(chromium: str, make_database: Callable[[], str]) -> Iterator[Server]:
    server = Server(
        make_database(),
        {"CONTEXTD_API_KEYS": f"{KEY_A}:tenant-a,{KEY_B}:tenant-b"},
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def seeded(console_server: Server) -> Seeded:
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
    # 401s are how a wrong key is told; the browser logs each failed fetch.
    real = [e for e in errors if "401" not in e and "404" not in e]
    assert not real, real


def screenshot(page: Any, name: str, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
