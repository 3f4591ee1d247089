"""Appending and reading the log over HTTP, against the real migrated database."""

from __future__ import annotations

import httpx

from app.core.settings import Settings
from tests.support.messages import call, log_of, result, user


async def test_append_creates_session_and_assigns_gap_free_seqs(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("hello"), {"role": "assistant", "content": "hi"}]},
    )
    assert r.status_code == 201, r.text
    acks = r.json()["messages"]
    assert [a["seq"] for a in acks] == [1, 2]
    assert all(a["token_count"] > 0 and a["id"] for a in acks)
    budget = r.json()["budget"]
    assert set(budget) >= {
        "status",
        "current_tokens",
        "usable_budget",
        "warn_threshold",
        "compact_threshold",
        "context_limit",
        "tokenizer_mode",
    }
    assert budget["status"] == "ok"
    assert budget["tokenizer_mode"] == "exact"

    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("again")]})
    assert [a["seq"] for a in r.json()["messages"]] == [3]
    assert [m["seq"] for m in await log_of(client, sid)] == [1, 2, 3]


async def test_protocol_complete_messages_are_stored_verbatim(
    client: httpx.AsyncClient, sid: str
) -> None:
    parts = [
        {"type": "text", "text": "what is in this image?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]
    messages = [
        {"role": "system", "content": "You are terse."},
        user(parts, pinned=True, metadata={"ui": {"color": "red"}}, mode="agent", run_id="r1"),
        {**call("call_a"), "reasoning_content": "thinking...", "x_vendor": {"k": [1, 2]}},
        result("call_a", "file body"),
        {
            "role": "assistant",
            "content": "partial out",
            "error": {"type": "timeout", "message": "stream cut"},
        },
        user("ui only", include_in_context=False, name="alice"),
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text
    log = await log_of(client, sid)
    assert [m["role"] for m in log] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert log[1]["content"] == parts
    assert log[1]["pinned"] is True and log[1]["mode"] == "agent" and log[1]["run_id"] == "r1"
    assert log[1]["metadata"] == {"ui": {"color": "red"}}
    assert log[2]["reasoning_content"] == "thinking..." and log[2]["x_vendor"] == {"k": [1, 2]}
    assert log[2]["content"] is None and log[2]["tool_calls"][0]["id"] == "call_a"
    assert log[4]["error"] == {"type": "timeout", "message": "stream cut"}
    assert log[5]["include_in_context"] is False and log[5]["name"] == "alice"

    one = await client.get(f"/sessions/{sid}/messages/4")
    assert one.status_code == 200
    assert one.json()["tool_call_id"] == "call_a" and one.json()["content"] == "file body"

    s = (await client.get(f"/sessions/{sid}")).json()
    assert s["stats"]["message_counts"] == {
        "system": 1,
        "user": 2,
        "assistant": 2,
        "tool": 1,
        "total": 6,
    }
    # The UI-only record and the historical system message are not part of the context.
    counted = sum(
        m["token_count"] for m in log if m["include_in_context"] and m["role"] != "system"
    )
    assert s["stats"]["context_tokens"] == counted


async def test_replay_with_same_ids_stores_nothing_and_returns_original_seqs(
    client: httpx.AsyncClient, sid: str
) -> None:
    batch = {
        "messages": [
            user("one", id="u-1"),
            call("c1") | {"id": "a-1"},
            result("c1") | {"id": "t-1"},
        ]
    }
    first = await client.post(f"/sessions/{sid}/messages", json=batch)
    assert first.status_code == 201
    again = await client.post(f"/sessions/{sid}/messages", json=batch)
    assert again.status_code == 200
    assert again.json()["messages"] == first.json()["messages"]
    assert len(await log_of(client, sid)) == 3

    # A batch mixing a replay and a new message stores only the new one.
    mixed = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("one", id="u-1"), user("two", id="u-2")]},
    )
    assert mixed.status_code == 201
    assert [a["seq"] for a in mixed.json()["messages"]] == [1, 4]
    assert [m["id"] for m in await log_of(client, sid)] == ["u-1", "a-1", "t-1", "u-2"]


async def test_replay_with_different_content_is_a_conflict(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("one", id="u-1")]})
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user("changed", id="u-1")]}
    )
    assert r.status_code == 409
    assert r.json()["code"] == "idempotency_conflict"
    assert [m["content"] for m in await log_of(client, sid)] == ["one"]


async def test_tool_results_must_answer_an_open_call(client: httpx.AsyncClient, sid: str) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("go"), call("c1")]})
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("nope")]})
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == "messages[0].tool_call_id"
    ok = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("c1")]})
    assert ok.status_code == 201
    twice = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("c1")]})
    assert twice.status_code == 422
    assert "already answered" in twice.json()["errors"][0]["msg"]
    reuse = await client.post(f"/sessions/{sid}/messages", json={"messages": [call("c1")]})
    assert reuse.status_code == 422
    assert reuse.json()["errors"][0]["loc"] == "messages[0].tool_calls[0].id"
    assert len(await log_of(client, sid)) == 3


async def test_paging_through_the_log(client: httpx.AsyncClient, sid: str) -> None:
    await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user(f"m{i}") for i in range(25)]}
    )
    seen: list[int] = []
    after = 0
    while True:
        r = await client.get(f"/sessions/{sid}/messages", params={"after_seq": after, "limit": 10})
        body = r.json()
        seen += [m["seq"] for m in body["messages"]]
        if body["next_after_seq"] is None:
            break
        after = body["next_after_seq"]
    assert seen == list(range(1, 26))


async def test_missing_session_and_message_are_404(client: httpx.AsyncClient, sid: str) -> None:
    for path in (f"/sessions/{sid}", f"/sessions/{sid}/messages", f"/sessions/{sid}/budget"):
        r = await client.get(path)
        assert r.status_code == 404, path
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["code"] == "not_found"
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("x")]})
    r = await client.get(f"/sessions/{sid}/messages/2")
    assert r.status_code == 404


async def test_appends_are_counted_with_the_sessions_own_tokenizer(
    client: httpx.AsyncClient, sid: str
) -> None:
    """The append counts before it reads the row, with the tokenizer the session had last
    time; a session on another model is counted again with its own, never stored wrong."""
    from app.core.tokens import get_counter

    text = "你好，世界。" * 50
    await client.put(f"/sessions/{sid}", json={"model": "some-local-llama"})
    want = get_counter("some-local-llama").count_message(user(text))
    assert want != get_counter("gpt-4o").count_message(user(text))
    for i in range(3):
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user(text)]})
        assert r.status_code == 201
        assert r.json()["messages"][0]["token_count"] == want
        assert r.json()["budget"]["tokenizer_mode"] == "estimate"
        assert r.json()["budget"]["current_tokens"] > want * (i + 1)
    assert [m["token_count"] for m in await log_of(client, sid)] == [want] * 3
    s = (await client.get(f"/sessions/{sid}")).json()
    assert s["stats"]["context_tokens"] == 3 * want


async def test_a_new_default_model_recounts_the_log_at_the_next_append(
    settings: Settings, database_url: str, sid: str
) -> None:
    """Sessions without a model follow the server's default: a server started with a
    default of another tokenizer recounts such a session's log before it appends."""
    from app.core.tokens import get_counter
    from app.main import create_app

    text = "你好，世界。" * 50
    for model in ("gpt-4o", "some-local-llama"):
        app = create_app(settings.model_copy(update={"default_model": model}), database_url)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                r = await c.post(f"/sessions/{sid}/messages", json={"messages": [user(text)]})
                assert r.status_code == 201, r.text
                want = get_counter(model).count_message(user(text))
                assert r.json()["messages"][0]["token_count"] == want
                log = await log_of(c, sid)
                assert [m["token_count"] for m in log] == [want] * len(log)
                s = (await c.get(f"/sessions/{sid}")).json()
                assert s["tokenizer"] == get_counter(model).name
                assert s["stats"]["context_tokens"] == want * len(log)


async def test_tool_steps_in_one_batch_and_across_batches(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A call answered in its own batch, a call answered in a later one, and batches whose
    calls contradict themselves (answered before made, answered twice): 422, nothing stored."""
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("go"), call("c1"), result("c1"), call("c2")]},
    )
    assert r.status_code == 201, r.text
    assert [m["seq"] for m in r.json()["messages"]] == [1, 2, 3, 4]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("c2")]})
    assert r.status_code == 201, r.text
    assert r.json()["messages"][0]["seq"] == 5
    early = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [result("c3"), call("c3")]}
    )
    assert early.status_code == 422
    assert early.json()["errors"][0]["loc"] == "messages[0].tool_call_id"
    twice = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [call("c4"), result("c4"), result("c4")]}
    )
    assert twice.status_code == 422
    assert twice.json()["errors"][0]["loc"] == "messages[2].tool_call_id"
    done = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("c1")]})
    assert done.status_code == 422 and "already answered" in done.json()["errors"][0]["msg"]
    nowhere = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("c9")]})
    assert nowhere.status_code == 422 and "answers no tool call" in nowhere.text
    assert len(await log_of(client, sid)) == 5
    # The refused answer left no trace: c9 is a new call, and then an open one.
    later = await client.post(f"/sessions/{sid}/messages", json={"messages": [call("c9")]})
    assert later.status_code == 201, later.text
    answer = await client.post(f"/sessions/{sid}/messages", json={"messages": [result("c9")]})
    assert answer.status_code == 201, answer.text
    assert [m["seq"] for m in await log_of(client, sid)] == [1, 2, 3, 4, 5, 6, 7]
    ctx = (await client.get(f"/sessions/{sid}/context")).json()
    assert [m["role"] for m in ctx["messages"]][-7:] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
