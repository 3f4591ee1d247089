"""The blocking client and the sync LangChain adapters against a real `contextd serve`."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx
from contextd_client import ContextdClient, Retry, StaleLockToken
from contextd_client.langchain import ContextdChatMessageHistory, ContextdMiddleware
from contextd_client.recall import run_recall
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI

from tests.support.fakellm import FakeLLM
from tests.support.langchain_tools import read_file
from tests.support.prefix_echo import MODEL, WIDE, measured, say
from tests.support.processes import Server


class LoseFirstAppendAnswer(httpx.HTTPTransport):
    """The server stores the batch; the client sees the connection drop."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path.endswith("/messages"):
            self.appends += 1
            if self.appends == 1:
                response.read()
                raise httpx.RemoteProtocolError("server disconnected", request=request)
        return response


async def test_the_sync_client_and_adapters_end_to_end(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    await asyncio.to_thread(sync_client_calls, server)
    await sync_middleware_run(server)


def sync_client_calls(server: Server) -> None:
    sid = f"sync-{uuid.uuid4().hex[:8]}"
    transport = LoseFirstAppendAnswer()
    with ContextdClient(server.base_url, transport=transport, retry=Retry(backoff=0.01)) as c:
        done = c.append(
            sid, [{"role": "user", "content": "one"}, {"role": "assistant", "content": "1"}]
        )
        assert transport.appends == 2 and [m.seq for m in done.messages] == [1, 2]
        assert c.get_session(sid).last_seq == 2  # stored once

        with c.lease(sid, "sync-agent", ttl_s=10, renew_every=0.1) as held:
            c.append(sid, [{"role": "user", "content": "two"}], lock_token=held.lock_token)
            token = held.lock_token
        assert [m.content for m in c.tail(sid, 2)] == ["1", "two"]
        cut = c.delete_tail(sid, 3)
        assert cut.deleted_count == 1 and cut.last_seq == 2
        assert [m.content for m in cut.messages] == ["two"]
        claimed = c.claim_lease(sid, "other")
        try:
            c.clear(sid, lock_token=token)
            raise AssertionError("a released lease's token must be stale")
        except StaleLockToken:
            pass
        # The recall tool's range read, on the blocking client.
        assert run_recall(c, sid, {"seqs": "[#1-2]"}) == "seq 1 (user):\none\nseq 2 (assistant):\n1"
        assert run_recall(c, sid, '{"seq": 2}') == "seq 2 (assistant):\n1"
        cleared = c.clear(sid, lock_token=claimed.lock_token)
        assert cleared.deleted_count == 2 and c.get_session(sid).last_seq == 0
        c.release_lease(sid, claimed.lock_token)

        history = ContextdChatMessageHistory(sid, client=c)
        history.add_messages([HumanMessage("hi", id="h"), AIMessage("hello", id="a")])
        assert history.messages == [HumanMessage("hi", id="h"), AIMessage("hello", id="a")]
        history.clear()
        assert history.messages == []

        # The blocking client echoes the stream's last prefix_id by itself: two steps
        # appended between calls, where the server's own guess would claim the first.
        c.put_session(sid, model=MODEL, auto_compact=False)
        c.append(sid, [say("user", 0)])
        first = c.context(sid, max_tokens=WIDE)
        c.append(sid, [say("assistant", 0), say("user", 1)])
        second = c.context(sid, max_tokens=WIDE)
        assert second.usage.stable_prefix_tokens == measured(first.messages, second.messages) > 0
        # An exact tokenizer records the provider's count and keeps factor 1.
        report = c.report_usage(
            sid,
            input_tokens=second.usage.input_tokens,
            uncalibrated_input_tokens=second.usage.uncalibrated_input_tokens or 1,
        )
        assert report.calibration["samples"] == 1 and report.calibration["factor"] == 1.0


async def sync_middleware_run(server: Server) -> None:
    sid = f"sync-agent-{uuid.uuid4().hex[:8]}"
    async with FakeLLM(behaviour="agent") as llm:
        with ContextdClient(server.base_url) as c:
            c.put_session(sid, system_prompt="Use read_file.")
            model = ChatOpenAI(
                model="gpt-4o-mini", base_url=llm.base_url, api_key="k", max_retries=0
            )
            agent: Any = create_agent(model, [read_file], middleware=[ContextdMiddleware(sid, c)])
            # invoke() blocks: run it off the loop that serves the fake model.
            out = await asyncio.to_thread(
                agent.invoke, {"messages": [{"role": "user", "content": "Count notes.txt"}]}
            )
            assert out["messages"][-1].content == "Done. The tool said: 3 lines in notes.txt"
            roles = [m.role for m in c.messages(sid).messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in llm.calls[1].body["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]
