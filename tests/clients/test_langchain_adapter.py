"""The LangChain adapters against a real contextd and the fake model server."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from contextd_client import AsyncContextdClient
from contextd_client.langchain import ContextdChatMessageHistory, ContextdMiddleware
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from tests.support.fakellm import FakeLLM
from tests.support.langchain_tools import read_file

pytestmark = pytest.mark.fake_llm(behaviour="agent")


def chat_model(llm: FakeLLM) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=llm.base_url, api_key="test-key", max_retries=0)


async def test_the_history_gives_back_exactly_the_messages_it_was_given(
    ctx: AsyncContextdClient, sid: str
) -> None:
    history = ContextdChatMessageHistory(sid, async_client=ctx)
    given = [
        SystemMessage("You are terse."),
        HumanMessage("How many lines in notes.txt?", id="h1"),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "read_file", "args": {"path": "notes.txt"}, "id": "call_1"}],
            response_metadata={"model_name": "gpt-4o-mini", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        ),
        ToolMessage("3 lines in notes.txt", tool_call_id="call_1", id="t1"),
        AIMessage("Three.", id="a2"),
    ]
    await history.aadd_messages(given)
    assert await history.aget_messages() == given
    # What contextd stored is plain chat: a payload of it goes straight to a model.
    payload = await ctx.context(sid)
    assert [m["role"] for m in payload.messages][-4:] == ["user", "assistant", "tool", "assistant"]
    assert payload.messages[-3]["tool_calls"][0]["function"]["name"] == "read_file"
    # Stored by id: adding the same messages again stores nothing.
    await history.aadd_messages(given[1:3])
    assert (await ctx.get_session(sid)).last_seq == 5


async def test_clear_empties_the_history_and_keeps_the_settings(
    ctx: AsyncContextdClient, sid: str
) -> None:
    await ctx.put_session(sid, system_prompt="Be brief.")
    history = ContextdChatMessageHistory(sid, async_client=ctx)
    await history.aadd_messages([HumanMessage("hi"), AIMessage("hello")])
    await history.aclear()
    assert await history.aget_messages() == []
    assert (await ctx.get_session(sid)).system_prompt == "Be brief."
    await ContextdChatMessageHistory(sid + "-none", async_client=ctx).aclear()  # no such session


async def test_the_middleware_feeds_a_tool_using_agent_from_contextd(
    ctx: AsyncContextdClient, llm: FakeLLM, sid: str
) -> None:
    await ctx.put_session(sid, model="gpt-4o-mini", system_prompt="Use read_file.")
    agent: Any = create_agent(
        chat_model(llm), [read_file], middleware=[ContextdMiddleware(sid, async_client=ctx)]
    )
    first = await agent.ainvoke({"messages": [{"role": "user", "content": "Count notes.txt"}]})
    assert first["messages"][-1].content == "Done. The tool said: 3 lines in notes.txt"
    second = await agent.ainvoke({"messages": [{"role": "user", "content": "And todo.md"}]})
    assert second["messages"][-1].content == "Done. The tool said: 1 lines in todo.md"

    log = (await ctx.messages(sid)).messages
    assert [(m.role, bool(m.tool_calls)) for m in log] == [
        ("user", False), ("assistant", True), ("tool", False), ("assistant", False),
        ("user", False), ("assistant", True), ("tool", False), ("assistant", False),
    ]  # fmt: skip
    assert log[2].tool_call_id == log[1].tool_calls[0]["id"]  # type: ignore[index]
    assert log[2].content == "3 lines in notes.txt"
    # Each model call read contextd's payload: the session's system prompt first,
    # the second run's first call with the first run's whole tool group.
    assert len(llm.calls) == 4
    roles = [[m["role"] for m in c.body["messages"]] for c in llm.calls]
    assert roles[0] == ["system", "user"]
    assert llm.calls[0].body["messages"][0]["content"] == "Use read_file."
    assert roles[2] == ["system", "user", "assistant", "tool", "assistant", "user"]


async def test_the_middleware_on_a_checkpointed_thread_stores_each_message_once(
    ctx: AsyncContextdClient, llm: FakeLLM, sid: str
) -> None:
    # The thread's state is contextd's last payload plus the answer: its next turn must
    # store only the new input, the payload's messages never again.
    await ctx.put_session(sid, model="gpt-4o-mini", system_prompt="Use read_file.")
    agent: Any = create_agent(
        chat_model(llm),
        [read_file],
        middleware=[ContextdMiddleware(sid, async_client=ctx)],
        checkpointer=InMemorySaver(),
    )
    thread = {"configurable": {"thread_id": sid}}
    await agent.ainvoke({"messages": [{"role": "user", "content": "Count notes.txt"}]}, thread)
    second = await agent.ainvoke({"messages": [{"role": "user", "content": "And todo.md"}]}, thread)
    assert second["messages"][-1].content == "Done. The tool said: 1 lines in todo.md"
    log = (await ctx.messages(sid)).messages
    assert [m.role for m in log] == ["user", "assistant", "tool", "assistant"] * 2
    assert [m.content for m in log if m.role == "user"] == ["Count notes.txt", "And todo.md"]
    roles = [[m["role"] for m in c.body["messages"]] for c in llm.calls]
    assert roles[2] == ["system", "user", "assistant", "tool", "assistant", "user"]


class _FakeMessagesAPI(BaseHTTPRequestHandler):
    """Anthropic's Messages API as far as one answer goes; keeps each request's body."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        self.bodies.append(json.loads(self.rfile.read(length)))
        answer = json.dumps({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 2},
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


async def test_on_anthropic_the_caching_middleware_marks_contextds_payload(
    ctx: AsyncContextdClient, sid: str
) -> None:
    # langchain-anthropic's middleware sets Anthropic's top-level cache_control (a
    # breakpoint on the request's last block) on the payload ContextdMiddleware put in
    # place, so the next call reads this one's payload (docs/guide.md).
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeMessagesAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        await ctx.put_session(sid, system_prompt="You read files.")
        await ctx.append(
            sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
        )
        model = ChatAnthropic(
            model="claude-contextd-test", base_url=f"http://127.0.0.1:{server.server_port}",
            api_key="test-key", max_retries=0,
        )  # fmt: skip
        middleware = [ContextdMiddleware(sid, async_client=ctx), AnthropicPromptCachingMiddleware()]
        agent: Any = create_agent(model, [], middleware=middleware)
        out = await agent.ainvoke({"messages": [{"role": "user", "content": "What now?"}]})
    finally:
        server.shutdown()
        server.server_close()
    assert out["messages"][-1].content == "Done."
    sent = _FakeMessagesAPI.bodies[-1]
    assert sent["cache_control"]["type"] == "ephemeral"
    assert sent["system"] == "You read files."  # the session's prompt, from the payload
    assert [(m["role"], m["content"]) for m in sent["messages"]] == [
        ("user", "hi"), ("assistant", "Hello."), ("user", "What now?"),
    ]  # fmt: skip
