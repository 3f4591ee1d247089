"""The recall tool's range read, run by the Python client (`seqs`: what a summary item
cites, read back at once and bounded), against an app that compacts with the
extractive summariser on its own database, and the real PostgreSQL."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from contextd_client import AsyncContextdClient
from contextd_client.agents import ContextdSession
from contextd_client.langchain import recall_tool as langchain_recall_tool
from contextd_client.recall import (
    NO_ARGUMENTS,
    RANGE_MAX_CHARS,
    RANGE_MAX_MESSAGES,
    arun_recall,
    recall_tool,
    share,
)
from fastapi import FastAPI

from app.core import recall_tool as tools
from app.core.settings import load_settings
from app.main import create_app
from app.messages import ranges

SMALL: dict[str, Any] = {
    "context_limit": 4000,
    "auto_compact": False,
    "compaction": {
        "reserved_output_tokens": 0,
        "safety_margin_tokens": 0,
        "min_preserved_turns": 2,
        "min_free_ratio": 0.0,
        "regrowth_ratio": 0.0,
    },
}
CITE = re.compile(r"\[#([0-9,\-]+)\]")


@pytest.fixture(scope="module")
async def app(make_database: Callable[[], str]) -> AsyncIterator[FastAPI]:
    """Overrides the suite's app, which runs no compactions, for this module's `ctx`."""
    application = create_app(load_settings(), database_url=make_database())
    async with application.router.lifespan_context(application):
        yield application


def agent_run(steps: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test in pkg/"}]
    for i in range(steps):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"pkg/m{i}.py"})},
        }
        out += [
            {"role": "assistant", "content": f"Checking module m{i}."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"pkg/m{i}.py\n" + f"def f{i}(): pass\n" * 20,
            },
        ]
    return out


def headers(output: str) -> list[int]:
    return [int(s) for s in re.findall(r"^seq (\d+) \(", output, flags=re.M)]


def test_the_clients_definition_is_the_servers() -> None:
    assert recall_tool() == tools.chat_tool()
    assert (RANGE_MAX_MESSAGES, RANGE_MAX_CHARS) == (50, 20_000)
    for lengths, budget in (([10, 10, 1000, 500], 420), ([5, 5], 100), ([900] * 7, 1000)):
        assert share(lengths, budget) == ranges.share(lengths, budget)


async def test_a_compaction_summarys_citations_are_read_back_by_the_tool(
    ctx: AsyncContextdClient, sid: str
) -> None:
    await ctx.put_session(sid, **SMALL)
    await ctx.append(sid, agent_run(30))
    done = await ctx.compact(sid, wait=True)
    assert done.status in ("success", "degraded"), done
    payload = await ctx.context(sid, recall=True)
    assert recall_tool() in payload.tools  # what the model is offered, the client runs
    summary = "\n".join(str(m.get("content") or "") for m in payload.messages)
    cited = CITE.findall(summary)
    assert cited, summary
    log = {m.seq: m for m in (await ctx.messages(sid, limit=1000)).messages}
    for citation in cited:
        wanted = [s for a, b in ranges.parse_seqs(citation) for s in range(a, b + 1)]
        output = await arun_recall(ctx, sid, {"seqs": citation})
        assert headers(output) == wanted[:RANGE_MAX_MESSAGES], (citation, output)
        for s in wanted[:RANGE_MAX_MESSAGES]:
            content = log[s].content
            assert content is None or str(content) in output
        # The citation copied with its brackets reads the same.
        assert await arun_recall(ctx, sid, json.dumps({"seqs": f"[#{citation}]"})) == output


async def test_a_range_read_is_bounded_and_says_how_to_read_on(
    ctx: AsyncContextdClient, sid: str
) -> None:
    huge = "".join(f"line {i}: building\n" for i in range(4000))
    msgs = [{"role": "user", "content": huge if i == 3 else f"message {i}"} for i in range(1, 81)]
    await ctx.append(sid, msgs)
    wide = await arun_recall(ctx, sid, {"seqs": "1-80"})
    assert headers(wide) == list(range(1, RANGE_MAX_MESSAGES + 1))
    assert wide.endswith(f'read on with seqs "{RANGE_MAX_MESSAGES + 1}-80"]')
    assert len(wide) < RANGE_MAX_CHARS + 60 * RANGE_MAX_MESSAGES  # text plus headers
    assert "seq 3 (user), first " in wide and f"of {len(huge)} characters:" in wide
    assert "[cut: read it whole with seq 3, or line_start/line_end]" in wide
    assert "seq 2 (user):\nmessage 2\n" in wide  # short ones whole
    rest = await arun_recall(ctx, sid, {"seqs": f"{RANGE_MAX_MESSAGES + 1}-80"})
    assert headers(rest) == list(range(RANGE_MAX_MESSAGES + 1, 81)) and "read on" not in rest
    # Other spellings of a range: from_seq/to_seq, seq with to_seq, a seq written as one.
    few = await arun_recall(ctx, sid, {"seqs": "5-7"})
    assert headers(few) == [5, 6, 7]
    for args in (
        {"from_seq": 5, "to_seq": 7},
        {"seq": 5, "to_seq": 7},
        {"seq": "5-7"},
        {"range": "#5-7"},
    ):
        assert await arun_recall(ctx, sid, args) == few, args
    # The old shapes read as before.
    one = await arun_recall(ctx, sid, {"seq": 3, "line_start": 2, "line_end": 2})
    assert one == "seq 3 (user), lines 2-2 of 4000:\nline 1: building\n"
    assert (await arun_recall(ctx, sid, '{"seq": 2}')) == "seq 2 (user):\nmessage 2"
    assert headers(await arun_recall(ctx, sid, {"query": "message"}))[:1] != []
    # A call the server refuses answers with the reason naming the argument.
    bad = await arun_recall(ctx, sid, {"seqs": "9-3"})
    assert bad.startswith("recall failed: ") and "seqs" in bad, bad
    past = await arun_recall(ctx, sid, {"seqs": "900-910"})
    assert past == "No message of this conversation is in seqs 900-910 (its last seq is 80)."
    assert await arun_recall(ctx, sid, {}) == NO_ARGUMENTS


async def test_the_adapters_tools_take_seqs(ctx: AsyncContextdClient, sid: str) -> None:
    await ctx.append(sid, [{"role": "user", "content": f"message {i}"} for i in range(1, 6)])
    want = await arun_recall(ctx, sid, {"seqs": "2-3"})
    assert headers(want) == [2, 3]
    lc = langchain_recall_tool(sid, async_client=ctx)
    assert await lc.ainvoke({"seqs": "2-3"}) == want
    agents_tool = ContextdSession(sid, ctx).recall_tool()
    assert await agents_tool.on_invoke_tool(None, json.dumps({"seqs": "[#2-3]"})) == want  # type: ignore[arg-type]
