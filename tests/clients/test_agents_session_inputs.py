"""ContextdSession under the Agents SDK `Runner` on a Responses model, against a real
contextd: what reaches the model in a streamed run, with files and images given by id,
with any `format` asked for, and with no function tools."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from agents import (
    Agent,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
)
from contextd_client import AsyncContextdClient
from contextd_client.agents import ContextdSession
from openai import AsyncOpenAI

from tests.support.agents_tools import read_file
from tests.support.clients import LoseAnswers
from tests.support.responses_model import ResponsesModel

pytestmark = pytest.mark.usefixtures("no_tracing")


@pytest.fixture
async def openai(responses_model: ResponsesModel) -> AsyncIterator[AsyncOpenAI]:
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(responses_model))
    async with (
        http,
        AsyncOpenAI(base_url="http://model.test/v1", api_key="k", http_client=http) as c,
    ):
        yield c


def agent(openai: AsyncOpenAI, tools: list[Any]) -> Agent[Any]:
    model = OpenAIResponsesModel("gpt-4o-mini", openai)
    return Agent(name="files", instructions="Use read_file.", tools=tools, model=model)


def config(session: ContextdSession) -> RunConfig:
    return RunConfig(call_model_input_filter=session.call_model_input_filter)


async def run_streamed(agent: Agent[Any], session: ContextdSession, text: str) -> str:
    result = Runner.run_streamed(agent, text, session=session, run_config=config(session))
    async for _ in result.stream_events():
        pass
    return str(result.final_output)


@pytest.mark.parametrize("existing", [False, True], ids=["new session", "existing session"])
async def test_a_streamed_run_gives_the_model_its_new_input_and_stores_it_once(
    ctx: AsyncContextdClient,
    responses_model: ResponsesModel,
    openai: AsyncOpenAI,
    sid: str,
    existing: bool,
) -> None:
    # run_streamed calls the filter before it stores its input: the filter stores it.
    if existing:
        await ctx.put_session(sid)
    files = agent(openai, [read_file])
    session = ContextdSession(sid, ctx)
    assert await run_streamed(files, session, "How many lines in notes.txt") == (
        "Done. The tool said: 3 lines in notes.txt"
    )
    assert await run_streamed(files, session, "And in todo.md") == (
        "Done. The tool said: 1 lines in todo.md"
    )
    # A run that is not streamed stores its input itself, before the filter.
    ran = await Runner.run(files, "And notes.txt", session=session, run_config=config(session))
    assert ran.final_output == "Done. The tool said: 3 lines in notes.txt"

    firsts = [responses_model.bodies[i]["input"] for i in (0, 2, 4)]
    assert [i[-1]["content"] for i in firsts] == [
        "How many lines in notes.txt", "And in todo.md", "And notes.txt",
    ]  # fmt: skip
    log = (await ctx.messages(sid)).messages
    assert [(m.role, bool(m.tool_calls)) for m in log] == [
        ("user", False), ("assistant", True), ("tool", False), ("assistant", False),
    ] * 3  # fmt: skip
    assert [m.content for m in log if m.role == "user"] == [
        "How many lines in notes.txt", "And in todo.md", "And notes.txt",
    ]  # fmt: skip


async def test_files_and_images_given_by_id_reach_the_model_as_they_were_given(
    ctx: AsyncContextdClient, responses_model: ResponsesModel, openai: AsyncOpenAI, sid: str
) -> None:
    parts = [
        {"type": "input_text", "text": "What is in these?"},
        {"type": "input_file", "filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBERi0xLjQK"},
        {"type": "input_file", "file_id": "file-notes"},
        {"type": "input_image", "file_id": "file-photo", "detail": "low"},
    ]  # fmt: skip
    user: Any = {"role": "user", "content": parts}
    session = ContextdSession(sid, ctx)
    await Runner.run(agent(openai, []), [user], session=session, run_config=config(session))
    assert responses_model.bodies[0]["input"][-1]["content"] == parts
    # Stored as chat parts contextd takes (and counts an image as an image).
    stored = (await ctx.messages(sid)).messages[0]
    assert stored.content == [
        {"type": "text", "text": "What is in these?"},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": parts[1]["file_data"]}},
        {"type": "file", "file": {"file_id": "file-notes"}},
        {"type": "image_url", "image_url": {"file_id": "file-photo", "detail": "low"}},
    ]  # fmt: skip
    assert not (stored.metadata or {}).get("responses_items")  # the chat form alone is exact
    assert (await session.get_items())[0] == user


@pytest.mark.parametrize("fmt", ["responses", "anthropic"])
async def test_a_format_the_filter_cannot_hand_the_sdk_is_refused_at_once(
    ctx: AsyncContextdClient, sid: str, fmt: str
) -> None:
    with pytest.raises(ValueError, match=f"format='{fmt}'"):
        ContextdSession(sid, ctx, format=fmt)
    assert ContextdSession(sid, ctx, format="openai", max_tokens=500).context_options == {
        "max_tokens": 500
    }


async def test_an_agent_without_function_tools_is_budgeted_without_tools(
    ctx: AsyncContextdClient, transport: LoseAnswers, openai: AsyncOpenAI, sid: str
) -> None:
    # The session's stored tools are not the agent's: the model gets none of them.
    stored_tool = {"type": "function", "function": {"name": "search", "parameters": {}}}
    await ctx.put_session(sid, tools=[stored_tool])
    session = ContextdSession(sid, ctx)
    ran = await Runner.run(agent(openai, []), "chat", session=session, run_config=config(session))
    assert ran.final_output == "Echo: chat"
    asked = [r for r in transport.sent if r.url.path.endswith("/context")]
    assert len(asked) == 1 and json.loads(asked[0].content)["tools"] == []
