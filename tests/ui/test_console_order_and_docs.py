"""In headless Chromium: the sessions table's default order (the latest active first,
id and tokens on request), and /docs on a keyed server (the key typed into the page,
sent as a header with the description's read and every "Try it out")."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.console_data import Seeded
from tests.support.console_ui import KEY_A, ConsoleServer, login, rows_by_session, screenshot


def test_the_latest_active_session_leads_by_default(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    auth = {"Authorization": f"Bearer {KEY_A}"}
    with httpx.Client(base_url=console_server.base_url, headers=auth, timeout=30) as c:
        body = {"messages": [{"role": "user", "content": "back at it"}]}
        c.post(f"/sessions/{seeded.quiet}/messages", json=body).raise_for_status()
    login(page, console_server, KEY_A)
    assert page.input_value("#sort") == "activity"
    first = page.wait_for_selector("#sessions-body tr[data-session]:first-child")
    assert first.get_attribute("data-session") == seeded.quiet
    page.select_option("#sort", "id")
    page.wait_for_url("**sort=id**")
    page.wait_for_function(
        "() => { const ids = [...document.querySelectorAll('#sessions-body tr[data-session]')]"
        ".map((r) => r.dataset.session); return ids.length > 1 && "
        "ids.every((id, i) => i === 0 || ids[i - 1] < id); }"
    )
    assert list(rows_by_session(page)) == sorted(rows_by_session(page))


def test_docs_asks_for_the_key_and_sends_it_as_a_header(
    page: Any, console_server: ConsoleServer
) -> None:
    page.goto(f"{console_server.base_url}/docs")
    page.wait_for_selector("#contextd-key:not([hidden])")
    page.fill("#contextd-key-input", KEY_A)
    page.click("#contextd-key button[type=submit]")
    page.wait_for_selector("#contextd-key[hidden]", state="attached")
    block = page.locator('.opblock-get:has([data-path="/sessions"])').first
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    with page.expect_response(
        lambda r: r.url.split("?")[0].endswith("/sessions") and r.request.method == "GET"
    ) as answer:
        block.locator("button.execute").click()
    response = answer.value
    assert response.status == 200, response.text()
    assert response.request.headers.get("authorization") == f"Bearer {KEY_A}"
    assert KEY_A not in response.request.url and KEY_A not in page.url
    screenshot(page, "docs-with-key")
