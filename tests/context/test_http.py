"""GET/POST /sessions/{id}/context over HTTP on the real database (SPEC §3, §9)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.tokens import get_counter
from tests.support.messages import call, result, user


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def tool_ids(messages: list[dict[str, Any]]) -> tuple[set[str], set[str]]:
    made = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    answered = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    return made, answered


def exact_tokens(body: dict[str, Any]) -> int:
    counter = get_counter("gpt-4o")
    return counter.count_messages(body["messages"]) + counter.count_tools(body["tools"])


async def test_payload_order_and_accounting(client: httpx.AsyncClient, sid: str) -> None:
    tool = {
        "type": "function",
        "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}},
    }
    await client.put(f"/sessions/{sid}", json={"system_prompt": "Be brief.", "tools": [tool]})
    await client.post(
        f"/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "system", "content": "an old system note"},
                user("first"),
                call("c1"),
                result("c1", "contents"),
                assistant("done"),
                user("ui record", include_in_context=False),
                user("second"),
            ]
        },
    )
    r = await client.get(f"/sessions/{sid}/context", params={"mode": "agent"})
    assert r.status_code == 200, r.text
    body = r.json()
    roles = [m["role"] for m in body["messages"]]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert "agent" in body["messages"][1]["content"] and roles[1] == "system"
    assert roles[2:] == ["user", "assistant", "tool", "assistant", "user"]
    assert body["kept_seqs"] == [2, 3, 4, 5, 7]
    assert body["tools"] == [tool]
    assert body["usage"]["input_tokens"] == exact_tokens(body)
    assert sum(body["usage"]["breakdown"].values()) == body["usage"]["input_tokens"]
    assert body["usage"]["status"] == "ok" and body["over_budget"] is False
    assert body["strategy"] == "key_messages"
    # Every seq of the effective history is explained.
    covered = set()
    for d in body["decisions"]:
        covered |= set(range(d["seq"], d.get("through", d["seq"]) + 1))
    assert covered == set(range(1, 8))
    # contextd's flags and unknown fields never reach the model.
    assert all(
        set(m) <= {"role", "content", "name", "tool_calls", "tool_call_id"}
        for m in body["messages"]
    )


@pytest.mark.parametrize("strategy", ["sliding_window", "key_messages", "summary"])
async def test_tight_budget_keeps_groups_whole_and_constraints(
    client: httpx.AsyncClient, sid: str, strategy: str
) -> None:
    msgs: list[dict[str, Any]] = [
        user("You must never push to main. Always run tests first.", pinned=True)
    ]
    for i in range(30):
        msgs += [
            user(f"step {i}: look at file src/mod{i}.py"),
            call(f"c{i}", args=f'{{"path": "src/mod{i}.py"}}'),
            result(f"c{i}", f"line {i}\n" * 40),
            assistant(f"mod{i} looks fine " * 5),
        ]
    msgs.append(user("now write the summary"))
    await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    r = await client.get(
        f"/sessions/{sid}/context", params={"max_tokens": 1500, "strategy": strategy}
    )
    body = r.json()
    assert body["strategy"] == strategy
    assert body["usage"]["input_tokens"] <= 1500
    assert body["usage"]["input_tokens"] == exact_tokens(body)
    made, answered = tool_ids(body["messages"])
    assert made == answered
    assert body["kept_seqs"] == sorted(body["kept_seqs"])
    assert body["kept_seqs"][-1] == len(msgs)  # the latest user message
    assert 1 in body["kept_seqs"]  # pinned, however old
    assert body["dropped_count"] > 0
    events = (await client.get(f"/sessions/{sid}/events", params={"type": "context."})).json()
    e = events["events"][-1]
    assert e["type"] == "context.compressed"
    assert e["data"]["budget"] == 1500 and e["data"]["kept_count"] == len(body["kept_seqs"])


async def test_big_tool_output_becomes_a_preview_readable_in_pieces(
    client: httpx.AsyncClient, sid: str
) -> None:
    big = "".join(f"row {i}: value={i * 7}\n" for i in range(5000))
    await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("dump the table"), call("big"), result("big", big), user("and?")]},
    )
    body = (await client.get(f"/sessions/{sid}/context")).json()
    tool_msg = next(m for m in body["messages"] if m["role"] == "tool")
    assert len(tool_msg["content"]) < len(big)
    assert f"/sessions/{sid}/messages/3" in tool_msg["content"]
    assert "row 0: value=0" in tool_msg["content"]  # head
    assert "row 4999" in tool_msg["content"]  # tail
    assert any(d["action"] == "preview" and d["seq"] == 3 for d in body["decisions"])

    piece = (
        await client.get(f"/sessions/{sid}/messages/3", params={"line_start": 10, "line_end": 12})
    ).json()
    assert piece["content"] == "row 9: value=63\nrow 10: value=70\nrow 11: value=77\n"
    assert piece["range"] == {"unit": "line", "start": 10, "end": 12, "total": 5000}
    piece = (
        await client.get(f"/sessions/{sid}/messages/3", params={"char_start": 0, "char_end": 6})
    ).json()
    assert piece["content"] == "row 0:" and piece["range"]["total"] == len(big)
    r = await client.get(f"/sessions/{sid}/messages/3", params={"char_start": 5, "line_start": 1})
    assert r.status_code == 422
    # The preview limit is a GET parameter as it is a POST field.
    small = await client.get(f"/sessions/{sid}/context", params={"preview_limit_tokens": 100})
    tool_msg = next(m for m in small.json()["messages"] if m["role"] == "tool")
    assert get_counter("gpt-4o").count_text(tool_msg["content"]) <= 100


async def test_the_preview_limit_grows_with_the_budget_from_the_setting_up(
    client: httpx.AsyncClient, sid: str
) -> None:
    # A file view of about 5,000 tokens the agent just opened.
    view = "".join(
        f"{i:5d}  def handler_{i}(request): return route(request, {i})\n" for i in range(300)
    )
    counter = get_counter("gpt-4o")
    assert 4000 < counter.count_text(view) < 8000
    msgs = [user("read the router"), call("v"), result("v", view), user("and the handler?")]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text

    async def sent(**params: Any) -> dict[str, Any]:
        body = (await client.get(f"/sessions/{sid}/context", params=params)).json()
        tool_msg = next(m for m in body["messages"] if m["role"] == "tool")
        return {"whole": tool_msg["content"] == view, "decisions": body["decisions"]}

    # At 128,000 tokens a sixteenth (8,000) holds it whole; at 32,000 the setting (2,000)
    # decides and it goes as a preview, as it does where the caller sets the limit.
    assert (await sent(max_tokens=128_000))["whole"]
    small = await sent(max_tokens=32_000)
    assert not small["whole"]
    assert any(d["action"] == "preview" and d["seq"] == 3 for d in small["decisions"])
    assert not (await sent(max_tokens=128_000, preview_limit_tokens=2000))["whole"]


async def test_post_context_with_per_call_parts(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={"system_prompt": "stored prompt"})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    r = await client.post(
        f"/sessions/{sid}/context",
        json={
            "system": "per-call prompt",
            "dynamic_context": [
                "Task goal: ship v2",
                {"role": "user", "content": "retrieved: doc A"},
            ],
            "max_tokens": 4000,
            "reserve_output_tokens": 500,
            "strategy": "sliding_window",
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    contents = [m["content"] for m in body["messages"]]
    assert contents[0] == "per-call prompt" and "stored prompt" not in contents
    assert contents.index("Task goal: ship v2") < contents.index("hi")
    assert body["usage"]["breakdown"]["dynamic"] > 0
    assert body["usage"]["budget"] in (4000, 3500)


@pytest.mark.parametrize(
    ("method", "params", "loc"),
    [
        ("GET", {"strategy": "nope"}, "strategy"),
        ("GET", {"max_tokens": -1}, "max_tokens"),
        ("GET", {"max_tokens": 10**12}, "max_tokens"),
        ("GET", {"max_tokens": 10**7}, "max_tokens"),
        ("GET", {"mode": "turbo"}, "mode"),
        ("POST", {"strategy": "nope"}, "strategy"),
        ("POST", {"max_tokens": 0}, "max_tokens"),
        ("POST", {"max_tokens": "many"}, "max_tokens"),
        (
            "POST",
            {"tools": [{"type": "function", "function": {"name": "has space"}}]},
            "tools[0].function.name",
        ),
        ("POST", {"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ("POST", {"tools": "x"}, "tools"),
        ("POST", {"max_tokens": 1000, "reserve_output_tokens": 1000}, "reserve_output_tokens"),
        (
            "POST",
            {"dynamic_context": [{"role": "tool", "content": "x"}]},
            "dynamic_context[0].role",
        ),
        ("POST", {"surprise": 1}, "surprise"),
        # A misspelt parameter used to be ignored: the payload then fitted the session's
        # whole budget.
        ("GET", {"max_token": 1000}, "max_token"),
        ("GET", {"preview_limit_tokens": 10}, "preview_limit_tokens"),
    ],
)
async def test_bad_context_requests_are_422(
    client: httpx.AsyncClient, sid: str, method: str, params: dict[str, Any], loc: str
) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    if method == "GET":
        r = await client.get(f"/sessions/{sid}/context", params=params)
    else:
        r = await client.post(f"/sessions/{sid}/context", json=params)
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["errors"]]
    assert any(x.startswith(loc) for x in locs), locs


async def test_context_of_missing_session_is_404(client: httpx.AsyncClient, sid: str) -> None:
    assert (await client.get(f"/sessions/{sid}/context")).status_code == 404


async def test_window_completes_a_tool_group_older_than_the_window(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A call whose results run past the read window must come back whole or not at all."""
    many = [result(f"p{i}", "x " * 300) for i in range(6)]
    parallel = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"p{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in range(6)
        ],
    }
    await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user("go"), parallel, *many, user("next")]}
    )
    for strategy in ("sliding_window", "key_messages", "summary"):
        body = (
            await client.get(
                f"/sessions/{sid}/context", params={"max_tokens": 900, "strategy": strategy}
            )
        ).json()
        made, answered = tool_ids(body["messages"])
        assert made == answered, strategy


@pytest.mark.parametrize("strategy", ["key_messages", "summary"])
async def test_mid_run_instructions_older_than_the_read_window_are_kept(
    client: httpx.AsyncClient, sid: str, strategy: str
) -> None:
    """An agent run of ~60k tokens with short instructions typed early: at a 2,000-token
    budget the service reads only the newest ~4,000 tokens of steps, yet every
    instruction reaches the payload verbatim, ahead of the tool outputs."""
    from tests.support.planted import choose

    notes = choose(3, offset=1)
    msgs: list[dict[str, Any]] = [user("Fix the failing test in tests/test_api.py.")]
    for i in range(40):
        if i in (2, 5, 9):
            msgs.append(notes[(2, 5, 9).index(i)].message())
        msgs += [call(f"c{i}"), result(f"c{i}", f"step {i} output line\n" * 300)]
    await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    r = await client.get(
        f"/sessions/{sid}/context", params={"max_tokens": 2000, "strategy": strategy}
    )
    body = r.json()
    assert body["over_budget"] is False and body["usage"]["input_tokens"] <= 2000
    for note in notes:
        assert note.message() in body["messages"], note.key
    assert msgs[0] in body["messages"]  # the task itself
    made, answered = tool_ids(body["messages"])
    assert made == answered and body["kept_seqs"][-1] == len(msgs)
