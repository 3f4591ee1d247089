"""The Python client reads the bill and the re-reads typed, and reports the provider's
cached figure (a real contextd, real PostgreSQL)."""

from __future__ import annotations

import json

from contextd_client import AsyncContextdClient, SessionBill

SYSTEM = " ".join(
    f"Rule {k}: keep file src/rule_{k}.py unchanged unless asked." for k in range(120)
)


def step(i: int, call_id: str | None = None) -> list[dict[str, object]]:
    cid = call_id or f"c{i}"
    args = json.dumps({"path": f"src/mod_{i}.py"})
    call = {"id": cid, "type": "function", "function": {"name": "read_file", "arguments": args}}
    out = "\n".join(f"line {k}: v_{i}_{k} = {i * 97 + k}" for k in range(20))
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": cid, "content": out},
    ]


async def test_the_bill_and_the_re_reads_are_typed(ctx: AsyncContextdClient, sid: str) -> None:
    await ctx.put_session(sid, model="gpt-4o", system_prompt=SYSTEM)
    await ctx.append(sid, [{"role": "user", "content": "Audit the repo."}])
    usages = []
    for i in range(12):
        await ctx.append(sid, step(i))
        usages.append((await ctx.context(sid, max_tokens=3000)).usage)
    last = usages[-1]
    assert last.cache_provider == "openai"
    assert last.cached_input_tokens is not None and last.cached_input_tokens > 0
    assert last.full_history_input_tokens is not None
    assert last.full_history_input_tokens > last.input_tokens
    # The oldest read again, after the trims left it out of the payload.
    await ctx.append(sid, step(0, "again0")[:1])
    session = await ctx.get_session(sid)
    assert session.stats is not None and session.stats.re_reads == 1
    bill = session.stats.bill
    assert isinstance(bill, SessionBill)
    assert bill.calls == len(usages)
    assert bill.cached_input_tokens == sum(u.cached_input_tokens or 0 for u in usages)
    assert bill.saved_tokens > 0
    report = await ctx.report_usage(
        sid,
        input_tokens=last.input_tokens,
        uncalibrated_input_tokens=last.uncalibrated_input_tokens or 1,
        cached_input_tokens=0,
        estimated_cached_input_tokens=last.cached_input_tokens,
    )
    assert report.bill_replaced
    after = (await ctx.get_session(sid)).stats
    assert after is not None and after.bill is not None
    assert after.bill.cached_input_tokens == bill.cached_input_tokens - last.cached_input_tokens
    assert after.bill.reported_calls == 1
