"""An agent recalls what its payload no longer holds: the scripted model server calls
the recall tool, the client or adapter runs it, and the answer quotes an output that
an earlier trim took out of the payload. Through the Python client, the Agents SDK
adapter and the LangChain adapter (MCP: tests/process/test_mcp.py)."""

from __future__ import annotations

import json

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
from contextd_client import AsyncContextdClient
from contextd_client.agents import ContextdSession
from contextd_client.langchain import ContextdMiddleware
from contextd_client.recall import RECALL_TOOL_NAME, arun_recall
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI

from tests.support.fakellm import FakeLLM
from tests.support.recall_history import BUDGET, QUESTION, SECRET, history

pytestmark = [pytest.mark.fake_llm(behaviour="recall"), pytest.mark.usefixtures("no_tracing")]


def sent_before_recall(llm: FakeLLM) -> str:
    """What the model was sent on its first call, before it recalled anything."""
    return json.dumps(llm.calls[0].body["messages"])


async def test_the_python_client_runs_the_recall_tool(
    ctx: AsyncContextdClient, llm: FakeLLM, sid: str
) -> None:
    await ctx.append(sid, history())
    await ctx.append(sid, [{"role": "user", "content": QUESTION}])
    async with AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as openai:
        for _ in range(5):
            payload = await ctx.context(sid, max_tokens=BUDGET, recall=True)
            assert RECALL_TOOL_NAME in [t["function"]["name"] for t in payload.tools]
            reply = await openai.chat.completions.create(
                model="gpt-4o-mini",
                messages=payload.messages,
                tools=payload.tools,
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            stored = message.model_dump(exclude_none=True)
            outputs = []
            for c in message.tool_calls:
                assert c.type == "function" and c.function.name == RECALL_TOOL_NAME
                output = await arun_recall(ctx, sid, c.function.arguments)
                outputs.append({"role": "tool", "tool_call_id": c.id, "content": output})
            await ctx.append(sid, [stored, *outputs])
    assert SECRET not in sent_before_recall(llm)
    assert "not shown here" in sent_before_recall(llm) or "[preview" in sent_before_recall(llm)
    assert message.content == f"Recalled: {SECRET}"
    # The search found the step's output (seq 11) by the token; the read gave it back.
    log = (await ctx.messages(sid, after_seq=161)).messages
    answers = [str(m.content) for m in log if m.role == "tool"]
    assert len(answers) == 2
    assert "seq 11 (tool shell) line 201" in answers[0] and SECRET in answers[1]


async def test_the_agents_sdk_adapter_offers_and_runs_the_recall_tool(
    ctx: AsyncContextdClient, llm: FakeLLM, sid: str
) -> None:
    await ctx.append(sid, history())
    session = ContextdSession(sid, ctx, max_tokens=BUDGET)
    async with AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as openai:
        agent = Agent(
            name="ops",
            instructions="Answer from the conversation; recall what is not shown.",
            tools=[session.recall_tool()],
            model=OpenAIChatCompletionsModel("gpt-4o-mini", openai),
        )
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        result = await Runner.run(agent, QUESTION, session=session, run_config=config)
    assert SECRET not in sent_before_recall(llm)
    assert [t["function"]["name"] for t in llm.calls[0].body["tools"]] == [RECALL_TOOL_NAME]
    assert result.final_output == f"Recalled: {SECRET}"
    kinds = [c.body["messages"][-1]["role"] for c in llm.calls]
    assert kinds == ["user", "tool", "tool"]  # asked, searched, read


async def test_the_langchain_middleware_registers_and_runs_the_recall_tool(
    ctx: AsyncContextdClient, llm: FakeLLM, sid: str
) -> None:
    await ctx.append(sid, history())
    model = ChatOpenAI(model="gpt-4o-mini", base_url=llm.base_url, api_key="k", max_retries=0)
    middleware = ContextdMiddleware(sid, async_client=ctx, recall=True, max_tokens=BUDGET)
    agent = create_agent(model, tools=[], middleware=[middleware])
    state = await agent.ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
    assert SECRET not in sent_before_recall(llm)
    assert state["messages"][-1].content == f"Recalled: {SECRET}"
    assert [t["function"]["name"] for t in llm.calls[0].body["tools"]] == [RECALL_TOOL_NAME]
    # The tool's calls and answers are in the log like any tool step.
    log = (await ctx.messages(sid, order="desc", limit=6)).messages
    assert any(SECRET in str(m.content) for m in log if m.role == "tool")
