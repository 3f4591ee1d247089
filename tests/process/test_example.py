"""examples/agent_loop.py, run as a user would: a real server, a model over HTTP."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.support.fakellm import FakeLLM
from tests.support.processes import REPO, Server


async def test_the_example_agent_answers_from_a_tool_and_leaves_a_whole_log(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = start_server()
    sid = f"example-{uuid.uuid4().hex[:8]}"
    (tmp_path / "notes.txt").write_text("alpha\nbeta\ngamma\n")
    async with FakeLLM() as llm:
        llm.behaviour = "agent"
        env = {
            **os.environ,
            "CONTEXTD_URL": server.base_url,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "MODEL": "gpt-4o-mini",
            "PYTHONPATH": str(REPO / "clients" / "python"),  # contextd_client, installed or not
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(REPO / "examples" / "agent_loop.py"),
            "--session", sid, "How many lines are in notes.txt",
            cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == "Done. The tool said: 3 lines in notes.txt"

    # The model saw exactly contextd's payloads: system prompt first, the session's
    # tools offered, and the second call carried the tool group whole.
    first, second = [c.body for c in llm.calls]
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["tools"][0]["function"]["name"] == "read_file"
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    call_id = second["messages"][2]["tool_calls"][0]["id"]
    assert second["messages"][3]["tool_call_id"] == call_id

    async with httpx.AsyncClient(base_url=server.base_url) as c:
        log = (await c.get(f"/sessions/{sid}/messages")).json()["messages"]
    assert [(m["seq"], m["role"]) for m in log] == [
        (1, "user"),
        (2, "assistant"),
        (3, "tool"),
        (4, "assistant"),
    ]
    assert log[2]["content"].startswith("3 lines in notes.txt")
    assert set(log[1]) >= {"tool_calls"} and "annotations" not in log[1]


async def test_the_agents_sdk_example_remembers_and_undoes(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = start_server()
    sid = f"example-sdk-{uuid.uuid4().hex[:8]}"
    (tmp_path / "notes.txt").write_text("alpha\nbeta\ngamma\n")

    async def example(*args: str) -> str:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(REPO / "examples" / "agents_sdk.py"), "--session", sid, *args,
            cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, err.decode()
        return out.decode().strip()

    async with FakeLLM() as llm:
        llm.behaviour = "agent"
        env = {
            **os.environ,
            "CONTEXTD_URL": server.base_url,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "PYTHONPATH": str(REPO / "clients" / "python"),
        }
        assert await example("How many lines are in notes.txt") == (
            "Done. The tool said: 3 lines in notes.txt"
        )
        assert "Done. The tool said" in await example("--undo")
        assert await example("Count notes.txt") == "Done. The tool said: 3 lines in notes.txt"
    async with httpx.AsyncClient(base_url=server.base_url) as c:
        log = (await c.get(f"/sessions/{sid}/messages")).json()["messages"]
    # The undone answer is gone; the second run saw the first one's tool group.
    assert [m["role"] for m in log] == [
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    third = llm.calls[2].body["messages"]
    assert [m["role"] for m in third] == ["system", "user", "assistant", "tool", "user"]


async def test_the_example_agent_recalls_what_its_payload_left_out(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    from tests.support.recall_history import QUESTION, SECRET, history

    server = start_server()
    sid = f"example-recall-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as c:
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": history()})
        assert r.status_code == 201
    async with FakeLLM(behaviour="recall") as llm:
        env = {
            **os.environ,
            "CONTEXTD_URL": server.base_url,
            "OPENAI_BASE_URL": llm.base_url,
            "OPENAI_API_KEY": "test-key",
            "MODEL": "gpt-4o-mini",
            "PYTHONPATH": str(REPO / "clients" / "python"),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(REPO / "examples" / "agent_loop.py"),
            "--session", sid, "--max-tokens", "4000", QUESTION,
            cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    assert out.decode().strip() == f"Recalled: {SECRET}"
    first = llm.calls[0].body
    assert SECRET not in str(first["messages"])
    assert [t["function"]["name"] for t in first["tools"]] == ["read_file", "recall"]
    assert any("not shown here" in str(m["content"]) for m in first["messages"])
