"""The session page shows the session's bill beside the token chart and its re-reads,
in headless Chromium, from a session driven like an agent loop over HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.support.console_ui import KEY_A, ConsoleServer, login

SYSTEM = " ".join(
    f"Rule {k}: keep file src/rule_{k}.py unchanged unless asked." for k in range(120)
)


def step(i: int, call_id: str | None = None) -> list[dict[str, Any]]:
    cid = call_id or f"c{i}"
    args = json.dumps({"path": f"src/mod_{i}.py"})
    call = {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}
    out = "\n".join(f"line {k}: v_{i}_{k} = {i * 97 + k}" for k in range(20))
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": out},
    ]


def test_session_page_shows_the_bill_and_the_re_reads(
    page: Any, console_server: ConsoleServer
) -> None:
    sid = "billed-loop"
    with httpx.Client(
        base_url=console_server.base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30
    ) as c:
        c.put(f"/sessions/{sid}", json={"model": "gpt-4o", "system_prompt": SYSTEM})
        c.post(f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "Go"}]})
        for i in range(12):
            c.post(f"/sessions/{sid}/messages", json={"messages": step(i)}).raise_for_status()
            c.get(f"/sessions/{sid}/context", params={"max_tokens": 3000}).raise_for_status()
        again = step(0, "again0")[:1]
        c.post(f"/sessions/{sid}/messages", json={"messages": again}).raise_for_status()
        bill = c.get(f"/sessions/{sid}").json()["stats"]["bill"]
    assert bill["calls"] == 12 and bill["cached_input_tokens"] > 0

    login(page, console_server, KEY_A, f"#/session/{sid}")
    page.wait_for_selector("#token-chart")
    line = page.inner_text("#bill")
    assert f"{bill['calls']} payload calls" in line
    assert f"{bill['input_tokens']:,}" in line and f"{bill['cached_input_tokens']:,}" in line
    assert f"{bill['full_history_input_tokens']:,}" in line
    assert page.inner_text("#re-reads b") == "1"
    # The console's own look at the payload is not a payload call: the bill is unchanged.
    with httpx.Client(
        base_url=console_server.base_url, headers={"Authorization": f"Bearer {KEY_A}"}, timeout=30
    ) as c:
        assert c.get(f"/sessions/{sid}").json()["stats"]["bill"]["calls"] == bill["calls"]
