"""The LangChain adapters with `ChatOpenAI(use_responses_api=True)`, against a real
contextd: the Responses blocks of its answers are stored as chat contextd takes, and
the middleware takes no `format` it cannot feed the agent from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from contextd_client import AsyncContextdClient
from contextd_client.langchain import ContextdChatMessageHistory, ContextdMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from tests.support.langchain_tools import read_file
from tests.support.responses_model import ResponsesModel


@pytest.fixture
async def model(responses_model: ResponsesModel) -> AsyncIterator[ChatOpenAI]:
    responses_model.reasoning = True  # a reasoning item and a preamble before each call
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(responses_model)) as http:
        yield ChatOpenAI(
            model="gpt-4o-mini", base_url="http://model.test/v1", api_key="test-key",
            use_responses_api=True, http_async_client=http, max_retries=0,
        )  # fmt: skip


async def test_the_history_stores_a_responses_answer_and_gives_it_back(
    ctx: AsyncContextdClient, model: ChatOpenAI, sid: str
) -> None:
    question = HumanMessage("How many lines in notes.txt", id="h1")
    answer = await model.bind_tools([read_file]).ainvoke([question])
    assert isinstance(answer, AIMessage) and isinstance(answer.content, list)
    kinds = [b["type"] for b in answer.content if isinstance(b, dict)]
    assert kinds == ["reasoning", "text", "function_call"]

    history = ContextdChatMessageHistory(sid, async_client=ctx)
    await history.aadd_messages([question, answer])
    assert await history.aget_messages() == [question, answer]
    # Chat a model takes: the text, the call as a tool call, no reasoning.
    stored = (await ctx.messages(sid)).messages[1]
    assert stored.content == [{"type": "text", "text": "Let me look."}]
    assert stored.tool_calls == [
        {"id": answer.tool_calls[0]["id"], "type": "function",
         "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'}},
    ]  # fmt: skip


async def test_the_middleware_runs_an_agent_on_the_responses_api(
    ctx: AsyncContextdClient, responses_model: ResponsesModel, model: ChatOpenAI, sid: str
) -> None:
    await ctx.put_session(sid, model="gpt-4o-mini", system_prompt="Use read_file.")
    agent: Any = create_agent(
        model, [read_file], middleware=[ContextdMiddleware(sid, async_client=ctx)]
    )
    first = await agent.ainvoke({"messages": [{"role": "user", "content": "Count notes.txt"}]})
    assert first["messages"][-1].text == "Done. The tool said: 3 lines in notes.txt"
    second = await agent.ainvoke({"messages": [{"role": "user", "content": "And todo.md"}]})
    assert second["messages"][-1].text == "Done. The tool said: 1 lines in todo.md"

    log = (await ctx.messages(sid)).messages
    assert [(m.role, bool(m.tool_calls)) for m in log] == [
        ("user", False), ("assistant", True), ("tool", False), ("assistant", False),
    ] * 2  # fmt: skip
    assert log[1].content == [{"type": "text", "text": "Let me look."}]
    # The second run's first call read the first run's whole tool group.
    sent = responses_model.bodies[2]["input"]
    assert [i.get("type", "message") for i in sent] == [
        "message", "message", "message", "function_call", "function_call_output",
        "message", "message",
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["responses", "anthropic"])
async def test_a_format_the_middleware_cannot_feed_the_agent_from_is_refused(
    ctx: AsyncContextdClient, sid: str, fmt: str
) -> None:
    with pytest.raises(ValueError, match=f"format='{fmt}'"):
        ContextdMiddleware(sid, async_client=ctx, format=fmt)
    kept = ContextdMiddleware(sid, async_client=ctx, format="openai", max_tokens=500)
    assert kept.context_options == {"max_tokens": 500}
