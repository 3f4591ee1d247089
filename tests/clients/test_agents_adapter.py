"""ContextdSession under the real OpenAI Agents SDK `Runner`, against a real contextd
and the fake model server: the model reads contextd's payload, the log stays whole."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
)
from contextd_client import AsyncContextdClient
from contextd_client.agents import ContextdSession
from openai import AsyncOpenAI

from tests.support.agents_tools import read_file
from tests.support.clients import LoseAnswers
from tests.support.fakellm import FakeLLM

pytestmark = [pytest.mark.fake_llm(behaviour="agent"), pytest.mark.usefixtures("no_tracing")]


@pytest.fixture
async def agent(llm: FakeLLM) -> AsyncIterator[Agent[Any]]:
    async with AsyncOpenAI(base_url=llm.base_url, api_key="test-key", max_retries=0) as openai:
        model = OpenAIChatCompletionsModel("gpt-4o-mini", openai)
        yield Agent(name="files", instructions="Use read_file.", tools=[read_file], model=model)


async def run(agent: Agent[Any], session: ContextdSession, text: str) -> str:
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    result = await Runner.run(agent, text, session=session, run_config=config)
    return str(result.final_output)


async def test_a_multi_turn_tool_run_keeps_its_log_and_reads_contextd_payloads(
    ctx: AsyncContextdClient, transport: LoseAnswers, llm: FakeLLM, agent: Agent[Any], sid: str
) -> None:
    session = ContextdSession(sid, ctx)
    assert await run(agent, session, "How many lines in notes.txt") == (
        "Done. The tool said: 3 lines in notes.txt"
    )
    assert await run(agent, session, "And in todo.md") == "Done. The tool said: 1 lines in todo.md"

    log = (await ctx.messages(sid)).messages
    assert [(m.seq, m.role, bool(m.tool_calls)) for m in log] == [
        (1, "user", False), (2, "assistant", True), (3, "tool", False), (4, "assistant", False),
        (5, "user", False), (6, "assistant", True), (7, "tool", False), (8, "assistant", False),
    ]  # fmt: skip
    assert log[2].tool_call_id == log[1].tool_calls[0]["id"]  # type: ignore[index]
    assert log[3].content == "Done. The tool said: 3 lines in notes.txt"

    # Every model call got contextd's payload: the instructions as the system block,
    # the history from the log, tool groups whole.
    bodies = [c.body for c in llm.calls]
    assert len(bodies) == 4
    assert [m["role"] for m in bodies[0]["messages"]] == ["system", "user"]
    assert bodies[0]["messages"][0]["content"] == "Use read_file."
    last = bodies[3]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant",
                                         "user", "assistant", "tool"]  # fmt: skip
    assert last[6]["tool_calls"][0]["id"] == last[7]["tool_call_id"]
    # Each model call after the first echoed the previous payload's prefix_id (the
    # client remembers it), so contextd's stable_prefix_tokens are exact.
    asked = [json.loads(r.content) for r in transport.sent if r.url.path.endswith("/context")]
    echoes = [body.get("previous_prefix_id") for body in asked]
    assert len(echoes) == 4 and echoes[0] is None
    assert all(echoes[1:]) and len(set(echoes[1:])) == 3

    # The SDK reads back exactly the items it stored.
    items = await session.get_items()
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call_output", "message",
    ] * 2  # fmt: skip
    assert items[0] == {"content": "How many lines in notes.txt", "role": "user"}
    assert items[3]["content"][0]["text"] == "Done. The tool said: 3 lines in notes.txt"  # type: ignore[index, typeddict-item]
    assert await session.get_items(limit=3) == items[-3:]


async def test_the_filter_sends_the_fitted_payload_not_the_whole_history(
    ctx: AsyncContextdClient, llm: FakeLLM, agent: Agent[Any], sid: str
) -> None:
    # A long history the SDK would send whole; contextd fits it into 1,000 tokens.
    old = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "filler " * 80}
           for i in range(40)]  # fmt: skip
    await ctx.append(sid, old)
    session = ContextdSession(sid, ctx, max_tokens=1000)
    assert (await run(agent, session, "Count notes.txt")).endswith("notes.txt")
    sent = llm.calls[0].body["messages"]
    assert len(sent) < 20 and sent[-1] == {"role": "user", "content": "Count notes.txt"}
    counted = await ctx.count_tokens(model="gpt-4o-mini", messages=sent)
    assert counted.messages is not None and counted.messages <= 1000
    assert not any("turn 0 " in json.dumps(m) for m in sent)  # the oldest went first
    assert (await ctx.get_session(sid)).last_seq == 44


async def test_an_add_items_whose_answer_was_lost_is_stored_once(
    ctx: AsyncContextdClient, transport: LoseAnswers, sid: str
) -> None:
    session = ContextdSession(sid, ctx)
    transport.lose_next(1, lambda r: r.method == "POST" and r.url.path.endswith("/messages"))
    items: list[Any] = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c9", "name": "read_file", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c9", "output": "no file"},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert (await ctx.get_session(sid)).last_seq == 3
    appends = [r for r in transport.sent if r.method == "POST" and r.url.path.endswith("/messages")]
    assert len(appends) == 2 and appends[0].content == appends[1].content


async def test_pop_item_undoes_the_last_item_and_the_run_goes_on(
    ctx: AsyncContextdClient, llm: FakeLLM, agent: Agent[Any], sid: str
) -> None:
    session = ContextdSession(sid, ctx)
    await run(agent, session, "How many lines in notes.txt")
    answer = await session.pop_item()  # undo the final answer
    assert answer is not None and answer["content"][0]["text"].endswith("notes.txt")  # type: ignore[index, typeddict-item]
    output = await session.pop_item()  # and the tool result: the call is open again
    assert output == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "3 lines in notes.txt",
    }
    assert (await ctx.get_session(sid)).last_seq == 2
    # The freed seqs are reused, the call id can be answered again.
    await session.add_items([output])
    assert (await ctx.messages(sid)).messages[-1].seq == 3
    assert await run(agent, session, "And in todo.md") == "Done. The tool said: 1 lines in todo.md"
    roles = [m.role for m in (await ctx.messages(sid)).messages]
    assert roles == ["user", "assistant", "tool", "user", "assistant", "tool", "assistant"]


async def test_pop_item_takes_one_of_parallel_calls(ctx: AsyncContextdClient, sid: str) -> None:
    session = ContextdSession(sid, ctx)
    calls: list[Any] = [
        {"role": "user", "content": "both"},
        {"type": "function_call", "call_id": "a", "name": "read_file", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "read_file", "arguments": "{}"},
    ]
    await session.add_items(calls)
    assert await session.pop_item() == calls[2]
    assert await session.get_items() == calls[:2]
    log = (await ctx.messages(sid)).messages
    assert [c["id"] for c in log[-1].tool_calls or []] == ["a"]


async def test_clear_session_empties_the_log_and_keeps_the_settings(
    ctx: AsyncContextdClient, llm: FakeLLM, agent: Agent[Any], sid: str
) -> None:
    await ctx.put_session(sid, model="gpt-4o-mini", anchors=["answer briefly"])
    session = ContextdSession(sid, ctx)
    await run(agent, session, "How many lines in notes.txt")
    await session.clear_session()
    assert await session.get_items() == []
    kept = await ctx.get_session(sid)
    assert kept.last_seq == 0 and kept.anchors == ["answer briefly"]
    await run(agent, session, "And in todo.md")
    assert [m.seq for m in (await ctx.messages(sid)).messages] == [1, 2, 3, 4]


async def test_a_session_that_does_not_exist_reads_empty(
    ctx: AsyncContextdClient, sid: str
) -> None:
    session = ContextdSession(sid, ctx)
    assert await session.get_items() == [] and await session.get_items(5) == []
    assert await session.pop_item() is None
