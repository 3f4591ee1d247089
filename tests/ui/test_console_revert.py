"""The console's Revert button on the latest stored compaction, in headless Chromium."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.console_data import turn
from tests.support.console_ui import KEY_A, ConsoleServer, login, screenshot


def _api(server: ConsoleServer) -> httpx.Client:
    headers = {"Authorization": f"Bearer {KEY_A}"}
    return httpx.Client(base_url=server.base_url, headers=headers, timeout=60)


def _compacted_twice(c: httpx.Client, sid: str) -> list[dict[str, Any]]:
    c.put(f"/sessions/{sid}", json={"context_limit": 6000, "auto_compact": False})
    jobs = []
    for start in (0, 12):
        batch = [m for k in range(start, start + 12) for m in turn(k)]
        c.post(f"/sessions/{sid}/messages", json={"messages": batch}).raise_for_status()
        r = c.post(f"/sessions/{sid}/compact", json={"wait": True, "force": True})
        r.raise_for_status()
        assert r.json()["status"] in ("success", "degraded"), r.text
        jobs.append(r.json())
    return jobs


def _state(c: httpx.Client, sid: str) -> dict[str, Any]:
    return dict(c.get(f"/sessions/{sid}/compaction").json())


def test_revert_button_on_the_latest_stored_compaction_asks_first(
    page: Any, console_server: ConsoleServer
) -> None:
    sid = "revert-agent"
    with _api(console_server) as c:
        first, second = _compacted_twice(c, sid)
        before = _state(c, sid)
    login(page, console_server, KEY_A, f"#/session/{sid}")
    page.wait_for_selector("#history tr.job")
    buttons = page.query_selector_all("#history button.revert")
    assert [b.get_attribute("data-job") for b in buttons] == [second["job_id"]]

    # Dismissed: nothing is sent, nothing changes.
    page.once("dialog", lambda d: d.dismiss())
    page.click(f"#history button.revert[data-job='{second['job_id']}']")
    with _api(console_server) as c:
        assert _state(c, sid)["last_compaction_seq"] == before["last_compaction_seq"]

    # Confirmed: the previous summary and watermark come back, and the button moves to
    # the compaction before it.
    messages: list[str] = []

    def accept(d: Any) -> None:
        messages.append(d.message)
        d.accept()

    page.once("dialog", accept)
    page.click(f"#history button.revert[data-job='{second['job_id']}']")
    page.wait_for_selector(f"#history tr.job[data-job='{second['job_id']}'][data-reverted=true]")
    assert "Revert this compaction?" in messages[0]
    assert f"→ {first['watermark_after']:,}" in messages[0]
    page.wait_for_selector(f"#history button.revert[data-job='{first['job_id']}']")
    assert "reverted" in page.inner_text(f"#history tr.job[data-job='{second['job_id']}']")
    with _api(console_server) as c:
        after = _state(c, sid)
    assert after["last_compaction_seq"] == first["watermark_after"]
    watermark = int(page.inner_text(".stat:nth-child(3) b").split("/")[0].replace(",", ""))
    assert watermark == first["watermark_after"]
    screenshot(page, "session-reverted")


def test_a_leased_session_says_why_the_revert_was_refused(
    page: Any, console_server: ConsoleServer, request: pytest.FixtureRequest
) -> None:
    request.node.expected_console_errors = ("409",)  # the refusal is the point
    sid = "revert-leased-agent"
    with _api(console_server) as c:
        _, second = _compacted_twice(c, sid)
        c.post(f"/sessions/{sid}/lock", json={"owner": "agent-9", "ttl_s": 600})
        before = _state(c, sid)
    login(page, console_server, KEY_A, f"#/session/{sid}")
    page.once("dialog", lambda d: d.accept())
    page.click(f"#history button.revert[data-job='{second['job_id']}']")
    page.wait_for_selector("#history .revert-error:not(:empty)")
    assert "agent-9" in page.inner_text("#history .revert-error")
    with _api(console_server) as c:
        assert _state(c, sid)["last_compaction_seq"] == before["last_compaction_seq"]
