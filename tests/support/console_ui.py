"""The console's browser tests: the app served to the browser, its keys, a login and what
a page shows."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / ".artifacts" / "ui"
KEY_A = "ctxd_console-test-key-alpha"
KEY_B = "ctxd_console-test-key-bravo"


class ConsoleServer:
    """The app served by uvicorn on a free port, in a thread of the test process: a real
    HTTP server for the browser, without a process start (imports, migrations) to wait for."""

    def __init__(self, database_url: str) -> None:
        import uvicorn

        from app.core.settings import load_settings
        from app.main import create_app

        settings = load_settings(
            api_keys=f"{KEY_A}:tenant-a,{KEY_B}:tenant-b", run_compactions_in_process=True
        )
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(settings, database_url=database_url),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="console-server", daemon=True)

    def start(self, timeout: float = 60) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the console test server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def screenshot(page: Any, name: str, full_page: bool = True) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    size = page.viewport_size
    if full_page:  # as tall as the content, no taller
        page.set_viewport_size({"width": size["width"], "height": 200})
    page.screenshot(path=str(path), full_page=full_page)
    page.set_viewport_size(size)
    return path


def login(page: Any, server: ConsoleServer, key: str, hash_: str = "#/sessions") -> None:
    # A route change on a page that shows the form asks /ui/api/me again and, still
    # without a key, renders a new form: a key typed into the old one, just before it
    # is replaced, is never submitted (CI saw it). Fill only the form of this route.
    page.evaluate("document.getElementById('login')?.setAttribute('data-stale', '')")
    page.goto(f"{server.base_url}/ui/{hash_}")
    page.wait_for_selector("#login:not([data-stale])")
    page.fill("#key-input", key)
    page.click("#login button[type=submit]")
    page.wait_for_selector("#tenant")


def rows_by_session(page: Any) -> dict[str, str]:
    page.wait_for_selector("#sessions-body tr[data-session]")
    return {
        r.get_attribute("data-session"): r.get_attribute("data-status")
        for r in page.query_selector_all("#sessions-body tr[data-session]")
    }
