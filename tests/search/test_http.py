"""Recall search over HTTP (SPEC §2 `/search`), against the real migrated database."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.search import ranking
from tests.support.messages import call, result, user
from tests.support.search import append, search, searched_before, seqs

LOG = [
    user("Please fix the failing import in src/app/models.py"),  # 1
    call("c1", "read_file", '{"path": "src/app/models.py"}'),  # 2
    result("c1", "class Order:\n    snake_case_name = 1\n    def getUserName(self): ..."),  # 3
    call("c2", "run_tests", '{"target": "tests/test_orders.py"}'),  # 4
    result("c2", "FAILED tests/test_orders.py::test_total - code HXDUBJ: total mismatch"),  # 5
    {"role": "assistant", "content": "Die Datenbankverbindung ist fehlgeschlagen, Größe 12."},
    user("数据库连接失败了，请检查配置文件。"),  # 7
    {"role": "assistant", "content": "好的，我来检查数据库的配置。"},  # 8
    user("the weather is nice today"),  # 9
]


@pytest.fixture
async def logged(client: httpx.AsyncClient, sid: str) -> str:
    await append(client, sid, *LOG)
    return sid


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("HXDUBJ", {5}),  # a code, case-insensitive
        ("hxdu", {5}),  # by its start
        ("src/app/models.py", {1, 2}),  # a path, in a user message and tool-call arguments
        ("app/models.py", {1, 2}),  # by a run of its parts
        ("models.py", {1, 2}),
        ("snake_case_name", {3}),  # an identifier whole ...
        ("case_name", {3}),  # ... and by part
        ("getUserName", {3}),
        ("UserName", {3}),
        ("run_tests", {4}),  # a tool call's function name
        ("test_orders", {4, 5}),
        ("Datenbankverbindung", {6}),  # German, with umlauts
        ("größe", {6}),
        ("数据库", {7, 8}),  # Chinese without spaces: any substring of two or more
        ("连接失败", {7}),
        ("配置", {7, 8}),
    ],
)
async def test_finds_words_identifiers_and_cjk(
    client: httpx.AsyncClient, logged: str, q: str, expected: set[int]
) -> None:
    found = await search(client, logged, q)
    assert set(seqs(found)) == expected, (q, found)
    for hit in found["hits"]:
        assert hit["path"] == f"/sessions/{logged}/messages/{hit['seq']}"
        full = (await client.get(hit["path"])).json()
        assert full["seq"] == hit["seq"] and full["role"] == hit["role"]


async def test_hits_carry_role_tool_name_and_a_snippet_around_the_match(
    client: httpx.AsyncClient, sid: str
) -> None:
    filler = "lorem ipsum dolor sit amet " * 200
    await append(
        client,
        sid,
        user("start"),
        call("c1", "grep"),
        result("c1", filler + "ERROR E4711 in worker pool" + filler),
    )
    [hit] = (await search(client, sid, "E4711"))["hits"]
    assert (hit["seq"], hit["role"], hit["tool_name"]) == (3, "tool", "grep")
    assert "ERROR E4711 in worker pool" in hit["snippet"]
    assert len(hit["snippet"]) < 200 and hit["snippet"].startswith("…")
    [made] = (await search(client, sid, "grep"))["hits"]
    assert (made["seq"], made["role"], made["tool_name"]) == (2, "assistant", "grep")


async def test_rarer_terms_rank_first_in_a_natural_language_query(
    client: httpx.AsyncClient, sid: str
) -> None:
    noise = [user(f"what did the test say about step {i}?") for i in range(300)]
    await append(client, sid, *noise[:150])
    await append(client, sid, call("c1", "run"), result("c1", "deploy id QX-7781-ZZ ok"))
    await append(client, sid, *noise[150:])
    found = await search(client, sid, "what did the test say about QX-7781-ZZ?", limit=3)
    assert seqs(found)[0] == 152


async def test_the_recall_tools_own_calls_and_answers_come_after_what_they_quote(
    client: httpx.AsyncClient, logged: str
) -> None:
    """A model that searched for a code and logged the answer: searching again finds the
    tool output that holds the code first, its own call and answer (which quote it)
    after, and they take no place from it within `limit`."""
    await append(
        client,
        logged,
        call("r1", "recall", '{"query": "HXDUBJ"}'),  # 10
        result("r1", "1 messages match 'HXDUBJ':\nseq 5 (tool run_tests) line 1: code HXDUBJ"),
        call("r2", "recall", '{"query": "HXDUBJ total mismatch"}'),  # 12
        result("r2", "1 messages match 'HXDUBJ total mismatch':\nseq 5 (tool run_tests)"),
    )
    found = await search(client, logged, "HXDUBJ")
    assert seqs(found) == [5, 13, 12, 11, 10]
    assert [h["tool_name"] for h in found["hits"]] == ["run_tests"] + ["recall"] * 4
    assert seqs(await search(client, logged, "HXDUBJ", limit=1)) == [5]
    assert seqs(await search(client, logged, "HXDUBJ", roles="tool", limit=2)) == [5, 13]


async def test_echoes_that_fill_every_candidate_place_do_not_hide_what_they_quote(
    client: httpx.AsyncClient, logged: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More echoes of a code than candidates are scored (50; 4 here), as rare as the
    output they quote and newer: the output is still found, first."""
    monkeypatch.setattr(ranking, "RESCORED", 4)
    await searched_before(client, logged, "HXDUBJ", 3, 5, "tool run_tests")
    found = await search(client, logged, "HXDUBJ", limit=3)
    assert seqs(found) == [5, 15, 14]
    assert [h["tool_name"] for h in found["hits"]] == ["run_tests", "recall", "recall"]


async def test_filters_roles_before_seq_and_limit(client: httpx.AsyncClient, logged: str) -> None:
    assert seqs(await search(client, logged, "src/app/models.py", roles="user")) == [1]
    assert seqs(await search(client, logged, "src/app/models.py", roles="assistant,tool")) == [2]
    both = await client.get(
        f"/sessions/{logged}/search",
        params=[("q", "数据库"), ("roles", "user"), ("roles", "assistant")],
    )
    assert set(seqs(both.json())) == {7, 8}
    assert seqs(await search(client, logged, "数据库", before_seq=8)) == [7]
    assert len((await search(client, logged, "数据库", limit=1))["hits"]) == 1


async def test_compacted_and_out_of_context_messages_are_found(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(
        client,
        sid,
        user("remember the token KZ9931"),
        {"role": "user", "content": "UI note KZ9931", "include_in_context": False},
        {"role": "system", "content": "old system line KZ9931"},
    )
    assert seqs(await search(client, sid, "KZ9931")) == [3, 2, 1]


async def test_the_index_follows_tail_delete_clear_and_session_delete(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(client, sid, user("alpha WQ1"), user("beta WQ1"), user("gamma WQ1"))
    assert seqs(await search(client, sid, "WQ1")) == [3, 2, 1]
    r = await client.delete(f"/sessions/{sid}/messages", params={"from_seq": 2})
    assert r.status_code == 200
    assert seqs(await search(client, sid, "WQ1")) == [1]
    await append(client, sid, user("delta"))  # seq 2 again, other words
    assert seqs(await search(client, sid, "WQ1")) == [1]
    assert seqs(await search(client, sid, "delta")) == [2]
    assert (await client.post(f"/sessions/{sid}/clear")).status_code == 200
    assert seqs(await search(client, sid, "WQ1")) == []
    assert (await client.delete(f"/sessions/{sid}")).status_code in (200, 204)
    assert (await client.get(f"/sessions/{sid}/search", params={"q": "WQ1"})).status_code == 404


async def test_sessions_do_not_see_each_other(client: httpx.AsyncClient, sid: str) -> None:
    await append(client, sid, user("mine PLX55"))
    await append(client, sid + "-other", user("theirs PLX55"))
    assert seqs(await search(client, sid, "PLX55")) == [1]
    found = await search(client, sid + "-other", "PLX55")
    assert [h["snippet"] for h in found["hits"]] == ["theirs PLX55"]


@pytest.mark.parametrize(
    "q",
    [
        "...",
        "!!! ??? ***",
        ".*+?[](){}|^$\\",
        "'; DROP TABLE messages; --",
        "a & b | !c <-> d:*",
        "%_%",
        "\x00",
        "'\\'",
    ],
)
async def test_odd_queries_answer_200_and_never_break(
    client: httpx.AsyncClient, logged: str, q: str
) -> None:
    found = await search(client, logged, q)
    assert isinstance(found["hits"], list)


async def test_bad_queries_are_422_naming_the_field(client: httpx.AsyncClient, logged: str) -> None:
    path = f"/sessions/{logged}/search"
    cases: list[tuple[Any, str]] = [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "   "}, "q"),
        ({"q": "x" * 10_000}, "q"),
        ({"q": "a", "limit": 0}, "limit"),
        ({"q": "a", "limit": 51}, "limit"),
        ({"q": "a", "before_seq": 0}, "before_seq"),
        ({"q": "a", "roles": "user,robot"}, "roles"),
    ]
    for params, loc in cases:
        r = await client.get(path, params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.json()["errors"][0]["loc"] == loc
    # Invalid UTF-8 in the query string: decoded with replacement characters, no 500.
    r = await client.get(path + "?q=%ff%fe%fd")
    assert r.status_code in (200, 422), r.text
    ghost = await client.get(f"/sessions/{logged}-none/search", params={"q": "a"})
    assert ghost.status_code == 404 and ghost.json()["code"] == "not_found"


async def test_a_search_sees_every_acknowledged_append(client: httpx.AsyncClient, sid: str) -> None:
    for i in range(20):
        await append(client, sid, user(f"note NN{i}X"))
        assert seqs(await search(client, sid, f"NN{i}X")) == [i + 1]


async def test_large_and_odd_messages_are_stored_and_found(
    client: httpx.AsyncClient, sid: str
) -> None:
    words = " ".join(f"w{i}x{i * 7919 % 10007}" for i in range(60_000))
    blob = "A" * 5000
    odd = "it's a \\ back'slash 'quoted' \u200b zero-width, emoji 🎉 and tab\tend"
    await append(client, sid, user(words), user(blob + " TAILWORD"), user(odd))
    assert seqs(await search(client, sid, "w10x")) == [1]  # prefix of many lexemes
    assert seqs(await search(client, sid, "TAILWORD")) == [2]
    assert seqs(await search(client, sid, "back'slash")) == [3]
    assert seqs(await search(client, sid, "quoted")) == [3]
