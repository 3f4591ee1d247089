"""The console's pages as an operator sees them, in headless Chromium."""

from __future__ import annotations

from typing import Any

import httpx
from playwright.sync_api import expect

from tests.support.console_data import Seeded
from tests.support.console_ui import KEY_A, KEY_B, ConsoleServer, login, rows_by_session, screenshot


def test_sessions_table_shows_each_status_the_lease_and_the_last_compaction(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    page.goto(f"{console_server.base_url}/ui/")
    page.wait_for_selector("#login")  # keys are configured: the page asks for one first
    login(page, console_server, KEY_A)
    assert page.inner_text("#tenant") == "tenant: tenant-a"
    rows = rows_by_session(page)
    assert rows == {
        seeded.quiet: "ok",
        seeded.warn: "warn",
        seeded.full: "compact_needed",
        seeded.compacted: "ok",
    }
    warn_row = page.inner_text(f'tr[data-session="{seeded.warn}"]')
    assert "worker-7" in warn_row
    compacted_row = page.inner_text(f'tr[data-session="{seeded.compacted}"]')
    assert "success" in compacted_row
    assert "never" in page.inner_text(f'tr[data-session="{seeded.full}"]')
    # The status colours: a compact_needed badge is red, an ok one green.
    bad = page.eval_on_selector(
        f'tr[data-session="{seeded.full}"] .badge', "e => getComputedStyle(e).backgroundColor"
    )
    ok = page.eval_on_selector(
        f'tr[data-session="{seeded.quiet}"] .badge', "e => getComputedStyle(e).backgroundColor"
    )
    assert bad == "rgb(210, 69, 60)" and ok == "rgb(46, 157, 91)"
    screenshot(page, "sessions")

    # Ordered by tokens on the server: the fullest session first.
    page.select_option("#sort", "tokens")
    page.wait_for_url("**sort=tokens**")
    page.wait_for_selector(
        f'#sessions-body tr[data-session]:first-child[data-session="{seeded.full}"]'
    )
    # The status filter hides rows of this page.
    page.uncheck('[data-status-filter="ok"]')
    assert set(rows_by_session(page).values()) == {"warn", "compact_needed"}
    # The id filter asks the server.
    page.fill("#prefix", "warn")
    page.press("#prefix", "Enter")
    page.wait_for_url("**prefix=warn**")
    expect(page.locator("#sessions-body tr[data-session]")).to_have_count(1)
    assert list(rows_by_session(page)) == [seeded.warn]


def test_session_page_draws_the_chart_the_breakdown_the_history_and_the_payload(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    login(page, console_server, KEY_A, f"#/session/{seeded.compacted}")
    page.wait_for_selector("#token-chart")
    assert page.inner_text("#session-id") == seeded.compacted
    # The chart: a line of at least a point per turn and one compaction mark.
    points = page.get_attribute("#token-chart polyline.line", "points")
    assert len(points.split()) >= 10
    marks = page.query_selector_all("#token-chart g.compaction-mark")
    assert [m.get_attribute("data-status") for m in marks] == ["success"]
    # The line drops where the compaction moved the watermark.
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert max(ys) - ys[-1] > 0  # lower y is more tokens: the end sits below the peak
    # Budget breakdown: summary and history segments, both thresholds.
    parts = {
        e.get_attribute("data-part") for e in page.query_selector_all("#breakdown [data-part]")
    }
    assert {"system", "summary", "history"} <= parts
    assert page.query_selector("#breakdown .tick.warn") and page.query_selector(
        "#breakdown .tick.compact"
    )
    # The compaction history: the stored compaction, what it freed, the summary's sections.
    history = page.query_selector_all("#history tr.job")
    assert [h.get_attribute("data-status") for h in history] == ["success"]
    assert "manual" in history[0].inner_text()
    assert page.query_selector("#summary-sections dt")
    # The payload: seqs after the watermark with their decisions, each linked to the message.
    page.wait_for_selector("#payload-messages tr.payload-message")
    seqs = [
        int(r.get_attribute("data-seq"))
        for r in page.query_selector_all("#payload-messages tr.payload-message[data-seq]")
        if r.get_attribute("data-seq")
    ]
    watermark = int(page.inner_text(".stat:nth-child(3) b").split("/")[0].replace(",", ""))
    assert seqs and min(seqs) > watermark
    assert page.query_selector("#decisions tr.decision[data-action=kept]")
    screenshot(page, "session", full_page=False)
    screenshot(page, "session-full")

    link = page.query_selector("#payload-messages a.full-message")
    seq = link.get_attribute("href").rsplit("/", 1)[1]
    link.click()
    page.wait_for_selector("#message pre")
    assert f'"seq": {seq}' in page.inner_text("#message pre")


def test_queue_page_shows_the_tenant_queue_and_recent_events_and_refreshes(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    login(page, console_server, KEY_A, "#/queue")
    page.wait_for_selector('#queue tr[data-tenant="tenant-a"]')
    row = page.inner_text('#queue tr[data-tenant="tenant-a"]')
    assert "success" in row and "0.0 %" in row
    health = page.inner_text("#health")
    assert "live contextd worker processes" in health and "true" in health
    types = {e.get_attribute("data-type") for e in page.query_selector_all("#events tr.event")}
    assert {"compaction.success", "context.compressed"} <= types
    first = page.inner_text("#updated")
    # Polling: the page redraws itself every few seconds.
    expect(page.locator("#updated")).not_to_have_text(first, timeout=8000)
    screenshot(page, "queue")


def test_a_key_sees_its_own_tenant_only_and_never_leaves_the_header(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    requests: list[Any] = []
    page.on("request", lambda r: requests.append(r))
    login(page, console_server, KEY_B)
    assert page.inner_text("#tenant") == "tenant: tenant-b"
    assert list(rows_by_session(page)) == ["bravo-only"]
    # Tenant A's session under tenant B's key: a plain "not found", as in the API.
    page.goto(f"{console_server.base_url}/ui/#/session/{seeded.compacted}")
    page.wait_for_selector("#not-found")
    assert seeded.compacted not in page.inner_text("#tenant")
    screenshot(page, "tenant-boundary")
    # The key is sent as a header and nowhere else: not in a URL, not in the page.
    api_calls = [r for r in requests if "/ui/api/" in r.url or "/sessions" in r.url]
    assert api_calls
    # (The page's first call, before the key was typed, carries none and gets 401.)
    assert {r.headers.get("authorization") for r in api_calls} == {None, f"Bearer {KEY_B}"}
    listing = [r for r in api_calls if "/ui/api/sessions" in r.url]
    assert listing and all(r.headers["authorization"] == f"Bearer {KEY_B}" for r in listing)
    assert not any(KEY_B in r.url for r in requests)
    assert KEY_B not in page.content()
    # A wrong key gets the form back with a message, and no data.
    page.click("#forget-key")
    page.fill("#key-input", "ctxd_wrong")
    page.click("#login button[type=submit]")
    page.wait_for_selector("#login-error:has-text('not accepted')")
    assert not page.query_selector("#sessions")


def test_a_session_that_stays_compact_needed_says_why_and_marks_stack(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    # One user message, then tool steps so large that the current turn's last four
    # (never compacted: min_preserved_steps) alone stay above the compact threshold.
    sid = "stuck-agent"
    steps: list[dict[str, Any]] = [{"role": "user", "content": "Refactor the parser."}]
    for i in range(7):
        steps += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"s{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"s{i}", "content": f"part {i} " + "word " * 1300},
        ]
    with httpx.Client(
        base_url=console_server.base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=70
    ) as c:
        c.put(
            f"/sessions/{sid}",
            json={
                "context_limit": 6000,
                "auto_compact": False,
                "compaction": {"reserved_output_tokens": 500, "safety_margin_tokens": 100},
            },
        ).raise_for_status()
        c.post(f"/sessions/{sid}/messages", json={"messages": steps}).raise_for_status()
        # Two compactions after the last message: one stores, the next has nothing left.
        for _ in range(2):
            r = c.post(f"/sessions/{sid}/compact", json={"wait": True, "timeout_s": 60})
            r.raise_for_status()
        assert c.get(f"/sessions/{sid}/budget").json()["status"] == "compact_needed"

    login(page, console_server, KEY_A, f"#/session/{sid}")
    page.wait_for_selector("#why")
    why = page.inner_text("#why")
    assert "Why still compact_needed" in why and "min_preserved_steps" in why, why
    assert "last 4 complete steps" in why
    # Both compactions happened after the same message: one mark, counted.
    marks = page.query_selector_all("#token-chart g.compaction-mark")
    assert [m.get_attribute("data-count") for m in marks] == ["2"]
    assert page.text_content("#token-chart text.compaction-count") == "×2"


def test_each_compaction_shows_its_gate_and_what_it_lost(
    page: Any, console_server: ConsoleServer, seeded: Seeded
) -> None:
    # Twelve deploys that each failed with a code found only in their output, no artifact
    # share, the extractive summary (no model): the newest failures fit the summary's
    # share and are kept (patched in if the summary lacked them); the oldest do not, and
    # the gate names each one it lost.
    sid = "gate-agent"
    steps: list[dict[str, Any]] = []
    for i in range(12):
        call = {"id": f"d{i}", "type": "function",
                "function": {"name": "deploy", "arguments": f'{{"service": "svc-{i}"}}'}}  # fmt: skip
        steps += [
            {"role": "user", "content": f"Deploy service {i}."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"d{i}",
                "content": f"error: quota exceeded (Q99{i:02d})",
            },
            {"role": "assistant", "content": "Noted."},
        ]
    steps.append({"role": "user", "content": "Go on."})
    with httpx.Client(
        base_url=console_server.base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=70
    ) as c:
        c.put(
            f"/sessions/{sid}",
            json={
                "context_limit": 6000,
                "auto_compact": False,
                "compaction": {"min_preserved_turns": 1, "artifacts_ratio": 0},
            },
        ).raise_for_status()
        c.post(f"/sessions/{sid}/messages", json={"messages": steps}).raise_for_status()
        r = c.post(f"/sessions/{sid}/compact", json={"wait": True, "force": True, "timeout_s": 60})
        r.raise_for_status()
        job = c.get(f"/sessions/{sid}/compaction").json()["jobs"][0]
    gate = job["gate"]
    assert gate["scores"]["error"] < 1, gate
    lost = [d for d in gate["dropped"] if d["kind"] == "error"]
    assert lost and all(d["over_share"] for d in lost), gate

    login(page, console_server, KEY_A, f"#/session/{sid}")
    page.wait_for_selector("#history tr.job .gate")
    score = page.query_selector("#history .gate-score[data-kind=error]")
    assert score is not None and float(score.get_attribute("data-score")) < 1
    text = page.inner_text("#history details.gate-lost")
    assert f"What this compaction lost ({len(gate['dropped'])})" in text
    assert lost[0]["text"] in text and "over its share" in text
    screenshot(page, "session-gate", full_page=False)
