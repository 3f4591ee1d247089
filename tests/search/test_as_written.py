"""A query that is one identifier finds its exact holders above newer messages holding only
its parts or its word in another case, however many (SPEC §3 "Recall": an exact match above
a prefix match; app/search/as_written.py). Both from misses of the agent-loop bench."""

from __future__ import annotations

import httpx

from tests.support.messages import call, result, user


async def _top(client: httpx.AsyncClient, sid: str, q: str) -> list[int]:
    r = await client.get(f"/sessions/{sid}/search", params={"q": q, "limit": 3})
    assert r.status_code == 200, r.text
    return [int(h["seq"]) for h in r.json()["hits"]]


async def test_an_old_exact_path_outranks_many_newer_holders_of_its_parts(
    client: httpx.AsyncClient, sid: str
) -> None:
    msgs = [
        user("Where is the session code?"),
        call("a"),
        result("a", "src/agent/session.ts\nsrc/agent/loop.ts"),
    ]
    for i in range(300):
        msgs += [
            call(f"e{i}"),
            result(f"e{i}", f"edited packages/coding-agent/src/core/agent-session.ts line {i}"),
        ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    assert (await _top(client, sid, "agent/session"))[0] == 3
    # The parts as the newer messages join them still find those first.
    assert (await _top(client, sid, "agent-session"))[0] == 2 * 300 + 3


async def test_an_old_code_in_capitals_outranks_newer_holders_of_the_word(
    client: httpx.AsyncClient, sid: str
) -> None:
    msgs = [user("Run them"), call("a"), result("a", "see BENCHMARKS.md for the BENCHMARKS table")]
    for i in range(300):
        msgs += [call(f"e{i}"), result(f"e{i}", f"the benchmarks ran: case {i} took {i} ms")]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    assert (await _top(client, sid, "BENCHMARKS"))[0] == 3
    assert (await _top(client, sid, "benchmarks"))[0] == 2 * 300 + 3
