"""Recall search in a long session (app/search/ranking.py), over HTTP against the real
database.

A long session takes other paths than a short one: the newest messages are sampled
to tell common terms from rare ones, phrases and prefixes are matched against a
recent window before the index, a query of only common terms scores the recent
messages and reads further back when they hold too few. The thresholds are scaled
down here so that a log of a hundred messages takes those paths.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.search import ranking
from tests.support.messages import call, result, user
from tests.support.search import append, search, searched_before, seqs


@pytest.fixture(autouse=True)
def long_session_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking, "SAMPLE", 10)
    monkeypatch.setattr(ranking, "COMMON", 4)
    monkeypatch.setattr(ranking, "SURELY_COMMON", 8)
    monkeypatch.setattr(ranking, "WINDOW", 20)
    monkeypatch.setattr(ranking, "FURTHER", 40)


async def test_a_rare_code_outranks_words_common_in_the_recent_messages(
    client: httpx.AsyncClient, sid: str
) -> None:
    noise = [user(f"what did the test say about step {i}?") for i in range(90)]
    await append(client, sid, *noise[:20])
    await append(client, sid, call("c1", "run"), result("c1", "deploy id QX-7781-ZZ ok"))
    await append(client, sid, *noise[20:])
    found = await search(client, sid, "what did the test say about QX-7781-ZZ?", limit=3)
    assert seqs(found)[0] == 22
    assert seqs(await search(client, sid, "QX-7781-ZZ")) == [22]


async def test_common_words_find_as_many_hits_as_asked_beyond_the_recent_window(
    client: httpx.AsyncClient, sid: str
) -> None:
    # "数据库" in every 4th message: common, and more often in the window than a
    # chance hit, yet the window holds fewer than asked for.
    log = [user("数据库连接失败" if i % 4 == 0 else f"平常的一句话 {i}") for i in range(1, 101)]
    await append(client, sid, *log)
    holding = [i for i in range(100, 0, -1) if i % 4 == 0]
    assert seqs(await search(client, sid, "数据库", limit=8)) == holding[:8]
    # Every 12th: rarer in the window than the sample can judge, counted through the index.
    await append(
        client,
        sid + "-b",
        *[user(f"DBX{i // 12} on" if i % 12 == 0 else "off") for i in range(1, 101)],
    )
    assert seqs(await search(client, sid + "-b", "on", limit=8)) == [96, 84, 72, 60, 48, 36, 24, 12]


async def test_an_identifier_found_by_a_run_of_its_parts_in_a_long_session(
    client: httpx.AsyncClient, sid: str
) -> None:
    log: list[dict[str, Any]] = []
    for i in range(1, 81):
        if i % 10 == 0:
            log.append(user(f"edited src/app/models.py line {i}"))
        else:
            log.append(user(f"models of the app, in py: notes {i}"))
    await append(client, sid, *log)
    # No message holds `app/models.py` as a whole: the phrase of its parts finds them.
    assert seqs(await search(client, sid, "app/models.py", limit=3)) == [80, 70, 60]


async def test_filters_hold_on_every_path(client: httpx.AsyncClient, sid: str) -> None:
    log: list[dict[str, Any]] = []
    for i in range(1, 61):
        log.append(call(f"c{i}", "grep", '{"pattern": "timeout"}'))
        log.append(result(f"c{i}", f"timeout after {i}s in worker"))
    await append(client, sid, *log)
    tool = await search(client, sid, "timeout worker", roles="tool", limit=5)
    assert seqs(tool) == [120, 118, 116, 114, 112]
    assert {h["role"] for h in tool["hits"]} == {"tool"}
    early = await search(client, sid, "timeout", before_seq=31, limit=4)
    assert seqs(early) == [30, 29, 28, 27]
    calls = await search(client, sid, "timeout", roles="assistant", before_seq=21, limit=3)
    assert seqs(calls) == [19, 17, 15]


async def test_a_chinese_question_naming_a_place_finds_it(
    client: httpx.AsyncClient, sid: str
) -> None:
    chat = [user(f"我想问一下之前提到的第{i}件事是什么？") for i in range(40)]
    await append(client, sid, *chat[:10])
    await append(
        client,
        sid,
        call("q1", "query_db", '{"domain": "景点"}'),
        result("q1", '[{"名称": "居庸关长城", "门票": 35}]'),
    )
    await append(client, sid, *chat[10:])
    found = await search(client, sid, "之前提到的居庸关长城是什么？", limit=3)
    assert seqs(found)[0] in (11, 12)
    assert "居庸关长城" in found["hits"][0]["snippet"]


async def test_a_question_naming_code_ranks_the_code_as_written_first(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(client, sid, call("x", "run"), result("x", "DEBUG: ignore=['CVS'], paths=[]"))
    await append(client, sid, *[user(f"CVS is checked out, note {i}") for i in range(12)])
    found = await search(client, sid, "what did the output say about ['CVS']?", limit=3)
    assert seqs(found)[0] == 2


async def test_recall_traffic_in_the_recent_messages_hides_no_older_match(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A model searched for a code many times: its calls and answers, all recent, make
    the code look common there. The tool output that holds it, far older, still comes
    first, and the recall traffic after it."""
    await append(client, sid, call("c1", "build"), result("c1", "error QX-4242 in parser"))
    # Within the recent window and the stretch read further back (20 and 40 here).
    await append(client, sid, *[user(f"plain message {i}") for i in range(30)])
    await searched_before(client, sid, "QX-4242", 6, 2, "tool build")
    found = await search(client, sid, "QX-4242", limit=3)
    assert seqs(found)[0] == 2
    assert [h["tool_name"] for h in found["hits"]] == ["build", "recall", "recall"]


async def test_a_code_the_model_searched_for_just_now_is_found_past_the_window(
    client: httpx.AsyncClient, sid: str
) -> None:
    """The model's last few recall calls all asked for the code: in the recent window
    only they hold it, often enough to make it look common, and they take every place
    asked for. The tool output that holds it, far past the window and the stretch read
    further back by primary key, still comes first (through the index)."""
    await append(client, sid, call("c1", "build"), result("c1", "error QX-4242 in parser"))
    await append(client, sid, *[user(f"plain message {i}") for i in range(100)])
    await searched_before(client, sid, "QX-4242", 3, 2, "tool build")
    found = await search(client, sid, "QX-4242", limit=3)
    assert seqs(found)[0] == 2
    assert [h["tool_name"] for h in found["hits"]] == ["build", "recall", "recall"]
    found = await search(client, sid, "what did the build say about QX-4242?", limit=2)
    assert seqs(found)[0] == 2
