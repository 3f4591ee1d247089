"""`/mcp` with the official `mcp` SDK's client against a real `contextd serve` process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import Server

ALPHA, BETA = "mcp-key-alpha-0123456789", "mcp-key-beta-9876543210"


@asynccontextmanager
async def mcp_client(server: Server, key: str) -> AsyncIterator[Client]:
    # The transport does not close a client it was given.
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        async with Client(streamable_http_client(server.base_url + "/mcp", http_client=http)) as c:
            yield c


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_search_read_and_budget_over_mcp_with_tenants(
    start_server: Callable[..., Server], sid: str
) -> None:
    server = start_server(env={"CONTEXTD_API_KEYS": f"{ALPHA}:alpha,{BETA}:beta"})
    big = "\n".join(f"line {i}: nothing" for i in range(400)) + "\nline 400: token QZ-4471 issued"
    messages = [
        {"role": "user", "content": "deploy it"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "deploy", "arguments": '{"env": "prod"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": big},
        {"role": "user", "content": "what was the token?"},
    ]
    async with httpx.AsyncClient(
        base_url=server.base_url, headers={"Authorization": f"Bearer {ALPHA}"}
    ) as http:
        r = await http.post(f"/sessions/{sid}/messages", json={"messages": messages})
        assert r.status_code == 201, r.text

    async with mcp_client(server, ALPHA) as alpha:
        names = {t.name for t in (await alpha.list_tools()).tools}
        assert {"search", "read_message", "read_messages", "budget"} <= names
        found = await alpha.call_tool("search", {"session_id": sid, "query": "QZ-4471"})
        assert not found.is_error, text_of(found)
        hits = json.loads(text_of(found))["hits"]
        assert [(h["seq"], h["role"], h["tool_name"]) for h in hits] == [(3, "tool", "deploy")]
        assert "QZ-4471" in hits[0]["snippet"]
        read = await alpha.call_tool(
            "read_message", {"session_id": sid, "seq": 3, "line_start": 401, "line_end": 401}
        )
        assert json.loads(text_of(read))["content"] == "line 400: token QZ-4471 issued"
        budget = json.loads(text_of(await alpha.call_tool("budget", {"session_id": sid})))
        assert budget["status"] == "ok" and budget["current_tokens"] > 0
        empty = await alpha.call_tool("search", {"session_id": sid, "query": ""})
        assert empty.is_error and "query: must not be empty" in text_of(empty)
        whole = json.loads(
            text_of(await alpha.call_tool("read_message", {"session_id": sid, "seq": 1}))
        )
        async with httpx.AsyncClient(
            base_url=server.base_url, headers={"Authorization": f"Bearer {ALPHA}"}
        ) as http:
            over_http = (await http.get(f"/sessions/{sid}/messages/1")).json()
        assert whole["created_at"] == over_http["created_at"]  # ISO 8601, as over HTTP
        # A seq past what the log can hold is refused by name, not sent to PostgreSQL.
        huge = await alpha.call_tool("read_message", {"session_id": sid, "seq": 2**63})
        assert huge.is_error and "seq" in text_of(huge), text_of(huge)
        # A summary item's cited range `[#1-3]`, read back at once, bounded.
        span = json.loads(
            text_of(
                await alpha.call_tool(
                    "read_messages", {"session_id": sid, "from_seq": 1, "to_seq": 3}
                )
            )
        )
        assert [m["seq"] for m in span["messages"]] == [1, 2, 3]
        assert span["messages"][2]["content"] == big  # within the read's bound: whole
        cited = await alpha.call_tool("read_messages", {"session_id": sid, "seqs": "[#1,3-500]"})
        assert [m["seq"] for m in json.loads(text_of(cited))["messages"]] == [1, 3, 4]
        bad = await alpha.call_tool("read_messages", {"session_id": sid, "seqs": "3-1"})
        assert bad.is_error and "seqs" in text_of(bad), text_of(bad)

    async with mcp_client(server, BETA) as beta:
        probes: list[tuple[str, dict[str, Any]]] = [
            ("search", {"session_id": sid, "query": "QZ-4471"}),
            ("read_message", {"session_id": sid, "seq": 3}),
            ("read_messages", {"session_id": sid, "from_seq": 1, "to_seq": 3}),
            ("budget", {"session_id": sid}),
        ]
        for name, args in probes:
            result = await beta.call_tool(name, args)
            assert result.is_error, (name, text_of(result))
            assert "does not exist" in text_of(result) and "QZ-4471" not in text_of(result)

    async with httpx.AsyncClient(base_url=server.base_url) as anon:
        r = await anon.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401


async def test_an_agent_recalls_a_trimmed_output_through_mcp(
    start_server: Callable[..., Server], sid: str
) -> None:
    """The scripted model calls the recall tool; the loop runs it as MCP tool calls."""
    from contextd_client import Message, SearchResult
    from contextd_client.recall import format_message, format_search
    from openai import AsyncOpenAI

    from tests.support.fakellm import FakeLLM
    from tests.support.recall_history import QUESTION, SECRET, history

    server = start_server(env={"CONTEXTD_API_KEYS": f"{ALPHA}:alpha"})
    headers = {"Authorization": f"Bearer {ALPHA}"}
    async with (
        FakeLLM(behaviour="recall") as llm,
        AsyncOpenAI(base_url=llm.base_url, api_key="k", max_retries=0) as openai,
        httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=30) as http,
        mcp_client(server, ALPHA) as mcp,
    ):
        r = await http.post(f"/sessions/{sid}/messages", json={"messages": history()})
        assert r.status_code == 201
        await http.post(f"/sessions/{sid}/messages", json={"messages": [
            {"role": "user", "content": QUESTION}
        ]})  # fmt: skip
        for _ in range(5):
            params: dict[str, Any] = {"max_tokens": 4000, "recall": "true"}
            payload = (await http.get(f"/sessions/{sid}/context", params=params)).json()
            reply = await openai.chat.completions.create(
                model="gpt-4o-mini", messages=payload["messages"], tools=payload["tools"]
            )
            message = reply.choices[0].message
            if not message.tool_calls:
                break
            answers = []
            for call in message.tool_calls:
                assert call.type == "function"
                args = json.loads(call.function.arguments)
                if "query" in args:
                    found = await mcp.call_tool("search", {"session_id": sid, **args})
                    output = format_search(SearchResult.model_validate_json(text_of(found)))
                else:
                    read = await mcp.call_tool("read_message", {"session_id": sid, **args})
                    output = format_message(Message.model_validate_json(text_of(read)))
                answers.append({"role": "tool", "tool_call_id": call.id, "content": output})
            stored = message.model_dump(exclude_none=True)
            r = await http.post(f"/sessions/{sid}/messages", json={"messages": [stored, *answers]})
            assert r.status_code == 201, r.text
        assert SECRET not in json.dumps(llm.calls[0].body["messages"])
        assert message.content == f"Recalled: {SECRET}"
