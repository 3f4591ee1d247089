"""Reading the log by seq ranges (SPEC §5 "Provenance": the recall tool reads a cited
range back): `GET /sessions/{id}/messages?seqs=&from_seq=&to_seq=&max_chars=` and the
MCP tool `read_messages`, bounded, tenant-scoped, with a compaction summary's
citations read back. Real PostgreSQL; the extractive summariser (no model)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.core.limits import RANGE_READ_CHARS, RANGE_READ_MESSAGES
from app.core.settings import load_settings
from app.messages.ranges import cite, parse_seqs, share
from tests.support.apps import app_client
from tests.support.compaction_http import SMALL, agent_run
from tests.support.mcp_wire import HEADERS
from tests.support.messages import user

A = {"Authorization": "Bearer range-key-a"}
B = {"Authorization": "Bearer range-key-b"}


@pytest.fixture(scope="module")
async def rc(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    settings = load_settings(api_keys="range-key-a:alpha,range-key-b:beta")
    async with app_client(settings, make_database(), "http://ranges.test") as c:
        yield c


async def seed(
    c: httpx.AsyncClient, sid: str, n: int, long_at: dict[int, str] | None = None
) -> None:
    """`n` messages, `message i` at seq i, a longer text at the seqs of `long_at`."""
    msgs = [user((long_at or {}).get(i, f"message {i}")) for i in range(1, n + 1)]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=A)
    assert r.status_code == 201, r.text


async def page(c: httpx.AsyncClient, sid: str, **params: Any) -> dict[str, Any]:
    r = await c.get(f"/sessions/{sid}/messages", params=params, headers=A)
    assert r.status_code == 200, r.text
    return dict(r.json())


def seqs_of(p: dict[str, Any]) -> list[int]:
    return [m["seq"] for m in p["messages"]]


async def mcp(c: httpx.AsyncClient, headers: dict[str, str], args: dict[str, Any]) -> Any:
    """One `tools/call` of `read_messages` on the wire: the parsed answer, or the error text."""
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "read_messages", "arguments": args},
    }
    r = await c.post("/mcp", json=call, headers={**HEADERS, **headers})
    assert r.status_code == 200, r.text
    result = r.json()["result"]
    text = "".join(block.get("text", "") for block in result["content"])
    return ("error", text) if result.get("isError") else json.loads(text)


def test_a_citation_is_read_as_a_summary_writes_it() -> None:
    assert parse_seqs("412-431") == [(412, 431)]
    assert parse_seqs("[#3,7-9]") == [(3, 3), (7, 9)]
    assert parse_seqs("#9, 7 - 8,3,4") == [(3, 4), (7, 9)]  # merged, in order
    assert parse_seqs("5\u20137") == [(5, 7)]  # an en dash, as a model may copy it
    assert cite([(3, 4), (7, 9), (12, 12)]) == "3-4,7-9,12"
    # Short texts whole, the long ones cut to one share of what is left.
    assert share([10, 10, 1000, 500], 420) == 200
    assert share([10, 20], 30) is None


async def test_a_range_over_http_by_bounds_and_by_citation(rc: httpx.AsyncClient, sid: str) -> None:
    await seed(rc, sid, 30)
    assert seqs_of(await page(rc, sid, from_seq=5, to_seq=9)) == [5, 6, 7, 8, 9]
    got = await page(rc, sid, seqs="[#3,7-9,28-40]")
    assert seqs_of(got) == [3, 7, 8, 9, 28, 29, 30]
    assert got["next_seqs"] is None and got["last_seq"] == 30
    assert got["messages"][1]["content"] == "message 7" and "range" not in got["messages"][1]
    # A page's limit: `next_seqs` is what of the citation is left to read.
    first = await page(rc, sid, seqs="2-4,10-20", limit=5)
    assert seqs_of(first) == [2, 3, 4, 10, 11] and first["next_seqs"] == "12-20"
    rest = await page(rc, sid, seqs=first["next_seqs"], limit=50)
    assert seqs_of(rest) == list(range(12, 21)) and rest["next_seqs"] is None
    # The bounds and the citation meet; so do after_seq/before_seq and newest first.
    assert seqs_of(await page(rc, sid, seqs="1-30", from_seq=4, to_seq=6)) == [4, 5, 6]
    assert seqs_of(await page(rc, sid, from_seq=4, after_seq=10, before_seq=13)) == [11, 12]
    newest = await page(rc, sid, seqs="1-3,20-25", order="desc", limit=4)
    assert seqs_of(newest) == [25, 24, 23, 22] and newest["next_seqs"] == "1-3,20-21"
    assert newest["next_before_seq"] == 22
    # Past the end, or between the cited ranges: an empty page, not an error.
    assert seqs_of(await page(rc, sid, seqs="31-40")) == []
    # Without the new parameters the listing is what it was.
    plain = await page(rc, sid, limit=2)
    assert seqs_of(plain) == [1, 2] and plain["next_after_seq"] == 2 and plain["next_seqs"] is None


async def test_max_chars_keeps_short_messages_whole_and_shares_the_rest(
    rc: httpx.AsyncClient, sid: str
) -> None:
    huge = "".join(f"line {i}: output\n" for i in range(3000))
    await seed(rc, sid, 6, long_at={2: huge, 5: huge[:9000]})
    got = await page(rc, sid, seqs="1-6", max_chars=2000)
    texts = [m["content"] for m in got["messages"]]
    assert sum(len(t) for t in texts) <= 2000
    assert texts[0] == "message 1" and texts[5] == "message 6"  # short ones whole
    cut = got["messages"][1]
    assert cut["range"] == {
        "unit": "char",
        "start": 0,
        "end": len(cut["content"]),
        "total": len(huge),
    }
    assert huge.startswith(cut["content"]) and len(cut["content"]) == len(texts[4])
    # The whole message stays one read away.
    whole = (await rc.get(f"/sessions/{sid}/messages/2", headers=A)).json()
    assert whole["content"] == huge


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"seqs": "12-x"}, "seqs"),
        ({"seqs": "9-3"}, "seqs"),
        ({"seqs": ""}, "seqs"),
        ({"seqs": "0-3"}, "seqs"),
        ({"seqs": f"1-{2**63}"}, "seqs"),
        ({"seqs": ",".join(str(i) for i in range(1, 400, 2))}, "seqs"),
        ({"seqs": "1" * 3000}, "seqs"),
        ({"from_seq": 9, "to_seq": 3}, "to_seq"),
        ({"from_seq": 0}, "from_seq"),
        ({"to_seq": "x"}, "to_seq"),
        ({"max_chars": 0}, "max_chars"),
    ],
)
async def test_bad_range_input_is_a_422_naming_the_field(
    rc: httpx.AsyncClient, sid: str, params: dict[str, Any], field: str
) -> None:
    await seed(rc, sid, 3)
    r = await rc.get(f"/sessions/{sid}/messages", params=params, headers=A)
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == field, r.text


async def test_range_reads_over_mcp_are_bounded_and_tenant_scoped(
    rc: httpx.AsyncClient, sid: str
) -> None:
    huge = "x" * 50_000
    await seed(rc, sid, 80, long_at={3: huge})
    got = await mcp(rc, A, {"session_id": sid, "seqs": "[#2-4]"})
    assert got["session_id"] == sid and seqs_of(got) == [2, 3, 4]
    assert got["messages"][1]["range"]["total"] == len(huge)
    assert sum(len(m["content"]) for m in got["messages"]) <= RANGE_READ_CHARS
    wide = await mcp(rc, A, {"session_id": sid, "seqs": "1-80"})
    assert seqs_of(wide) == list(range(1, RANGE_READ_MESSAGES + 1))
    assert wide["next_seqs"] == f"{RANGE_READ_MESSAGES + 1}-80"
    # The old shape, from_seq..to_seq, reads the same way.
    by_bounds = await mcp(rc, A, {"session_id": sid, "from_seq": 5, "to_seq": 7})
    assert seqs_of(by_bounds) == [5, 6, 7]
    kind, text = await mcp(rc, A, {"session_id": sid, "seqs": "7-x"})
    assert kind == "error" and "seqs" in text, text
    kind, text = await mcp(rc, A, {"session_id": sid})
    assert kind == "error" and "seqs" in text, text
    kind, text = await mcp(rc, A, {"session_id": sid, "from_seq": 9, "to_seq": 3})
    assert kind == "error" and "to_seq" in text, text
    # Another tenant's session is "not found", over MCP as over HTTP.
    kind, text = await mcp(rc, B, {"session_id": sid, "seqs": "1-3"})
    assert kind == "error" and "does not exist" in text and "message 1" not in text
    r = await rc.get(f"/sessions/{sid}/messages", params={"seqs": "1-3"}, headers=B)
    assert r.status_code == 404, r.text


CITE = re.compile(r"\[#([0-9,\-]+)\]")


async def test_a_compaction_summarys_citations_read_back(rc: httpx.AsyncClient, sid: str) -> None:
    await rc.put(f"/sessions/{sid}", json=SMALL, headers=A)
    msgs = [user("Fix the failing test in app/calc.py"), *agent_run(30)]
    r = await rc.post(f"/sessions/{sid}/messages", json={"messages": msgs}, headers=A)
    assert r.status_code == 201, r.text
    done = (await rc.post(f"/sessions/{sid}/compact", json={"wait": True}, headers=A)).json()
    assert done["status"] in ("success", "degraded"), done
    context = (await rc.get(f"/sessions/{sid}/context", headers=A)).json()
    summary = "\n".join(str(m.get("content") or "") for m in context["messages"])
    cited = CITE.findall(summary)
    assert cited, summary
    log = {m["seq"]: m for m in (await page(rc, sid, limit=1000))["messages"]}
    for citation in cited:
        wanted = [s for a, b in parse_seqs(citation) for s in range(a, b + 1)]
        got = await page(rc, sid, seqs=citation, limit=RANGE_READ_MESSAGES)
        assert seqs_of(got) == wanted[:RANGE_READ_MESSAGES], citation
        assert all(m["content"] == log[m["seq"]]["content"] for m in got["messages"])
        over_mcp = await mcp(rc, A, {"session_id": sid, "seqs": f"[#{citation}]"})
        assert seqs_of(over_mcp) == seqs_of(got)


async def test_every_payload_format_offers_the_range_read_and_its_bound(
    rc: httpx.AsyncClient, sid: str
) -> None:
    await seed(rc, sid, 3)
    schemas = {}
    for fmt in ("openai", "responses", "anthropic"):
        r = await rc.get(
            f"/sessions/{sid}/context", params={"recall": "true", "format": fmt}, headers=A
        )
        assert r.status_code == 200, r.text
        (tool,) = [
            t
            for t in r.json()["tools"]
            if "recall" in (t.get("name"), t.get("function", {}).get("name"))
        ]
        spec = tool.get("function", tool)
        schemas[fmt] = spec.get("parameters") or spec.get("input_schema")
        assert (
            f"At most {RANGE_READ_MESSAGES} messages and 20,000 characters" in spec["description"]
        )
        assert '"412-431"' in spec["description"]
    assert all(s["properties"]["seqs"]["type"] == "string" for s in schemas.values())
    assert schemas["openai"] == schemas["responses"] == schemas["anthropic"]
