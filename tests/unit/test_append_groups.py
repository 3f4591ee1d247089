"""The group-commit queue (app/messages/group_commit.py), with a writer that records its calls."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from app.messages.group_commit import GroupCommit


class Recorder:
    """A writer that takes a while, remembers each group, and can be told to fail."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.groups: list[list[tuple[str, int]]] = []
        self.writing: set[str] = set()
        self.overlaps: list[str] = []
        self.concurrent = 0
        self.most_concurrent = 0
        self.fail_with: Exception | None = None
        self.fail_group: int | None = None  # the 1-based group that fails with it
        self.refuse: set[tuple[str, int]] = set()

    async def write(self, items: list[tuple[str, int]]) -> list[str | None]:
        self.groups.append(items)
        self.concurrent += 1
        self.most_concurrent = max(self.most_concurrent, self.concurrent)
        for key, _ in items:
            if key in self.writing:
                self.overlaps.append(key)
            self.writing.add(key)
        try:
            await asyncio.sleep(self.delay)
            if self.fail_with is not None and self.fail_group in (None, len(self.groups)):
                raise self.fail_with
            return [None if item in self.refuse else f"{item[0]}#{item[1]}" for item in items]
        finally:
            self.concurrent -= 1
            for key, _ in items:
                self.writing.discard(key)


async def test_a_lone_item_is_written_at_once_in_a_group_of_its_own() -> None:
    rec = Recorder()
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=2, max_size=8)
    assert await groups.submit("a", ("a", 1)) == "a#1"
    assert rec.groups == [[("a", 1)]]


async def test_items_that_arrive_together_share_groups_one_per_key_in_arrival_order() -> None:
    rec = Recorder()
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=2, max_size=8)
    # 20 keys, 3 items each, all submitted before any group is written.
    items = [(f"k{k}", n) for k in range(20) for n in range(3)]
    results = await asyncio.gather(*(groups.submit(key, (key, n)) for key, n in items))

    assert results == [f"{key}#{n}" for key, n in items]
    assert sum(len(g) for g in rec.groups) == len(items)
    assert all(len(g) <= 8 for g in rec.groups)
    assert len(rec.groups) < len(items) / 4  # they were grouped, not written one by one
    for g in rec.groups:
        keys = [key for key, _ in g]
        assert len(keys) == len(set(keys)), g  # never two items of a key in one group
    assert rec.overlaps == []  # nor one key in two groups being written at once
    assert rec.most_concurrent <= 2
    for k in range(20):  # each key's items written in the order they came
        order = [n for g in rec.groups for key, n in g if key == f"k{k}"]
        assert order == [0, 1, 2]
    assert (groups.groups, groups.items) == (len(rec.groups), len(items))


async def test_an_item_the_writer_did_not_take_comes_back_as_none() -> None:
    rec = Recorder()
    rec.refuse = {("b", 0)}
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write)
    got = await asyncio.gather(*(groups.submit(k, (k, 0)) for k in "abc"))
    assert got == ["a#0", None, "c#0"]


async def test_a_writer_error_reaches_every_caller_of_its_group_and_no_other() -> None:
    rec = Recorder(delay=0.05)
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=1, max_size=4)
    rec.fail_with = ConnectionResetError("the commit's connection dropped")
    rec.fail_group = 2
    first = [asyncio.ensure_future(groups.submit(k, (k, 0))) for k in "abcd"]
    await asyncio.sleep(0.01)  # the first group is being written
    second = [asyncio.ensure_future(groups.submit(k, (k, 1))) for k in "abcd"]
    assert await asyncio.gather(*first) == ["a#0", "b#0", "c#0", "d#0"]
    outcomes = await asyncio.gather(*second, return_exceptions=True)
    assert all(isinstance(o, ConnectionResetError) for o in outcomes), outcomes
    # The queue goes on after a failed group.
    rec.fail_with = None
    assert await groups.submit("a", ("a", 2)) == "a#2"


async def test_close_waits_for_the_groups_being_written() -> None:
    rec = Recorder(delay=0.05)
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write)
    pending = asyncio.ensure_future(groups.submit("a", ("a", 0)))
    await asyncio.sleep(0)
    await groups.close()
    assert pending.done() and pending.result() == "a#0"


@pytest.mark.parametrize("lanes", [1, 3])
async def test_the_number_of_groups_written_at_once_is_capped(lanes: int) -> None:
    rec = Recorder(delay=0.005)
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=lanes, max_size=2)
    await asyncio.gather(*(groups.submit(f"k{i}", (f"k{i}", 0)) for i in range(30)))
    assert rec.most_concurrent == lanes


async def test_groups_are_written_outside_the_submitting_requests_context() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
    seen: list[str] = []

    async def write(items: list[str]) -> list[str | None]:
        seen.append(request_id.get())
        return list(items)

    groups: GroupCommit[str, str] = GroupCommit(write)
    request_id.set("request-1")
    assert await groups.submit("a", "x") == "x"
    assert seen == ["-"]
