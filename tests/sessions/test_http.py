"""Session settings, listing, deletion and budget status."""

from __future__ import annotations

import httpx

from tests.support.messages import user


async def test_put_creates_then_updates(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.put(
        f"/sessions/{sid}",
        json={
            "model": "gpt-4o-mini",
            "system_prompt": "You are a careful agent.",
            "anchors": ["Never delete production data"],
            "metadata": {"team": "infra"},
            "compaction": {"min_preserved_turns": 4},
        },
    )
    assert r.status_code == 201, r.text
    s = r.json()
    assert s["model"] == "gpt-4o-mini" and s["context_limit"] == 128000
    assert s["anchors"] == ["Never delete production data"]
    assert s["compaction"] == {"min_preserved_turns": 4}

    r = await client.put(f"/sessions/{sid}", json={"auto_compact": False})
    assert r.status_code == 200
    s = r.json()
    # Omitted fields keep their values.
    assert s["auto_compact"] is False and s["system_prompt"] == "You are a careful agent."
    r = await client.put(f"/sessions/{sid}", json={"anchors": None})
    assert r.json()["anchors"] == []


async def test_system_prompt_counts_toward_the_budget(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={})
    empty = (await client.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    await client.put(f"/sessions/{sid}", json={"system_prompt": "word " * 500})
    with_prompt = (await client.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    assert with_prompt - empty >= 500


async def test_budget_thresholds_follow_the_formula(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(
        f"/sessions/{sid}",
        json={
            "context_limit": 10000,
            "compaction": {"reserved_output_tokens": 1000, "safety_margin_tokens": 500},
        },
    )
    b = (await client.get(f"/sessions/{sid}/budget")).json()
    assert b["context_limit"] == 10000
    assert b["usable_budget"] == 8500
    assert b["warn_threshold"] == int(8500 * 0.8)
    assert b["compact_threshold"] == int(8500 * 0.9)
    assert b["status"] == "ok"


async def test_status_moves_through_warn_to_compact_needed(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(
        f"/sessions/{sid}",
        json={
            "context_limit": 2000,
            "auto_compact": False,
            "compaction": {"reserved_output_tokens": 0, "safety_margin_tokens": 0},
        },
    )
    statuses = []
    for i in range(40):
        r = await client.post(
            f"/sessions/{sid}/messages", json={"messages": [user(f"{i} " + "lorem ipsum " * 20)]}
        )
        statuses.append(r.json()["budget"]["status"])
        b = r.json()["budget"]
        expected = (
            "compact_needed"
            if b["current_tokens"] >= b["compact_threshold"]
            else "warn"
            if b["current_tokens"] >= b["warn_threshold"]
            else "ok"
        )
        assert b["status"] == expected
    assert statuses[0] == "ok" and "warn" in statuses and statuses[-1] == "compact_needed"
    assert statuses == sorted(statuses, key=["ok", "warn", "compact_needed"].index)
    events = (await client.get(f"/sessions/{sid}/events")).json()["events"]
    assert [e["type"] for e in events] == ["budget.warn", "budget.compact_needed"]


async def test_budget_preview_writes_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("start")]})
    now = (await client.get(f"/sessions/{sid}/budget")).json()
    r = await client.post(f"/sessions/{sid}/budget", json={"messages": [user("word " * 300)]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["added_tokens"] >= 300 and body["fits"] is True
    assert body["budget"]["current_tokens"] == now["current_tokens"] + body["added_tokens"]
    assert (await client.get(f"/sessions/{sid}/budget")).json() == now
    assert (await client.get(f"/sessions/{sid}")).json()["last_seq"] == 1


async def test_context_limit_may_not_exceed_the_models(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.put(f"/sessions/{sid}", json={"model": "gpt-4", "context_limit": 100000})
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == "context_limit"
    assert (await client.get(f"/sessions/{sid}")).status_code == 404
    r = await client.put(f"/sessions/{sid}", json={"model": "gpt-4"})
    assert r.json()["context_limit"] == 8192


async def test_bad_settings_name_the_field(client: httpx.AsyncClient, sid: str) -> None:
    cases = [
        ({"context_limit": -5}, "context_limit"),
        ({"compaction": {"warn_ratio": 0.95}}, "compaction"),
        ({"compaction": {"bogus": 1}}, "compaction.bogus"),
        ({"compaction": {"summary_temperature": 3}}, "compaction"),
        ({"anchors": [""]}, "anchors[0]"),
        ({"unknown": 1}, "unknown"),
        (
            {"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
            "tools[0].function.name",
        ),
        ({"strategy": "no_such_strategy"}, "strategy"),
        ({"metadata": {"k": "nul\u0000"}}, "metadata.k"),
    ]
    for body, loc in cases:
        r = await client.put(f"/sessions/{sid}", json=body)
        assert r.status_code == 422, (body, r.text)
        locs = [e["loc"] for e in r.json()["errors"]]
        assert any(x == loc or x.startswith(loc) for x in locs), (body, locs)
        # A session's override is named as the session spells it, not as the server's
        # environment variables do.
        assert "COMPACTION_" not in r.json()["detail"], r.json()["detail"]
    assert (await client.get(f"/sessions/{sid}")).status_code == 404
    r = await client.put(f"/sessions/{sid}", json={"compaction": {"warn_ratio": 0.95}})
    assert "compaction.warn_ratio=0.95" in r.json()["detail"], r.json()["detail"]


async def test_model_switch_recounts_the_log(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("你好，世界。" * 50)]})
    exact = (await client.get(f"/sessions/{sid}/messages/1")).json()["token_count"]
    r = await client.put(f"/sessions/{sid}", json={"model": "some-local-llama"})
    assert r.json()["tokenizer"] == "estimate"
    estimated = (await client.get(f"/sessions/{sid}/messages/1")).json()["token_count"]
    assert estimated != exact
    assert r.json()["budget"]["tokenizer_mode"] == "estimate"
    assert r.json()["stats"]["context_tokens"] == estimated


async def test_recount_leaves_out_what_the_model_never_sees(
    client: httpx.AsyncClient, sid: str
) -> None:
    # Historical system messages and UI-only ones are stored and recounted, but
    # neither the append nor the recount adds them to the context tokens.
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    messages = [
        {"role": "system", "content": "old instructions " * 40},
        user("a note for the UI " * 40, include_in_context=False),
        user("the real question " * 20),
    ]
    await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    before = (await client.get(f"/sessions/{sid}")).json()["stats"]["context_tokens"]
    assert before == (await client.get(f"/sessions/{sid}/messages/3")).json()["token_count"]
    r = await client.put(f"/sessions/{sid}", json={"model": "some-local-llama"})
    counts = [
        (await client.get(f"/sessions/{sid}/messages/{seq}")).json()["token_count"]
        for seq in (1, 2, 3)
    ]
    assert all(n > 0 for n in counts)
    assert r.json()["stats"]["context_tokens"] == counts[2] != before


async def test_list_is_cursor_paginated(client: httpx.AsyncClient, sid: str) -> None:
    ids = {f"{sid}-{i:02d}" for i in range(7)}
    for i in ids:
        await client.put(f"/sessions/{i}", json={})
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/sessions", params=params)).json()
        seen += [s["id"] for s in page["sessions"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert ids <= set(seen)
    assert seen == sorted(seen) and len(seen) == len(set(seen))


async def test_delete_removes_everything(client: httpx.AsyncClient, sid: str) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("x", id="keep")]})
    assert (await client.delete(f"/sessions/{sid}")).status_code == 204
    assert (await client.get(f"/sessions/{sid}")).status_code == 404
    assert (await client.delete(f"/sessions/{sid}")).status_code == 404
    # The id is free again: a new session starts from seq 1.
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("x", id="keep")]})
    assert r.status_code == 201 and r.json()["messages"][0]["seq"] == 1
