"""The summary's `user_messages` section across rolling compactions, end to end (SPEC §5).

Through HTTP and the compaction runner, on the model path (the tests' fake
model, `tests/support/fakellm.py`) and the extractive path (an app with no model): a
range with no user message keeps what the previous summary carried, a user
message larger than the section's whole share folds alone instead of taking
every older one with it, and a previous section over a lowered share keeps
its newest messages. What is carried shows in the summary text the payload
sends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.compaction.provenance import split_cites, strip_cites
from app.compaction.summary import HEADINGS
from app.core.settings import load_settings
from tests.support.apps import app_client, model_settings
from tests.support.compaction_http import agent_run, compact, state
from tests.support.fakellm import FakeLLM
from tests.support.messages import user
from tests.support.planted import INSTRUCTIONS

TASK = "Port the config loader to TOML; keep the old INI reader as a fallback."
# A task description pasted mid-run: longer than the section's whole share (800 tokens
# below), and it says "must", so the rule-based tagger calls it a constraint.
BIG = "New task. You must keep every public function signature unchanged.\n" + "".join(
    f"Spec line {i}: field f{i} maps to column c{i} of table t{i % 7}.\n" for i in range(90)
)
LAST = "Now run the whole test suite."
PLANTED = INSTRUCTIONS[:2]
SESSION: dict[str, Any] = {
    "context_limit": 8000,
    "auto_compact": False,
    "compaction": {
        "reserved_output_tokens": 0,
        "safety_margin_tokens": 0,
        "min_preserved_turns": 1,
        "compact_timeout_s": 3.0,  # seconds: a busy machine must not time the fake model out
        "min_free_ratio": 0.0,
        "regrowth_ratio": 0.0,
        "user_messages_ratio": 0.1,  # a share of 800 tokens
    },
}


@pytest.fixture(scope="module", params=["model", "extractive"])
async def uclient(
    request: pytest.FixtureRequest, llm: FakeLLM, make_database: Callable[[], str]
) -> AsyncIterator[httpx.AsyncClient]:
    settings = model_settings(llm.base_url, 1.0) if request.param == "model" else load_settings()
    async with app_client(settings, make_database(), f"http://{request.param}.test") as c:
        yield c


async def _append(c: httpx.AsyncClient, sid: str, msgs: list[dict[str, Any]]) -> None:
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def _compact(c: httpx.AsyncClient, sid: str) -> tuple[list[str], dict[str, Any]]:
    """Compacts; the stored `user_messages` and the compaction state."""
    done = await compact(c, sid)
    assert done["status"] == "success", done
    s = await state(c, sid)
    # The user's words, verbatim; each item also cites its seq (provenance).
    items = s["summary"]["structure"]["user_messages"]
    assert all(split_cites(i)[1] for i in items), items
    return [strip_cites(i) for i in items], s


async def _range_roles(c: httpx.AsyncClient, sid: str, s: dict[str, Any]) -> set[str]:
    span = s["compaction_metadata"]["range"]
    r = await c.get(
        f"/sessions/{sid}/messages",
        params={"after_seq": span["from_seq"] - 1, "limit": 500},
    )
    assert r.status_code == 200, r.text
    return {
        m["role"] for m in r.json()["messages"] if span["from_seq"] <= m["seq"] <= span["to_seq"]
    }


async def _payload_summary(c: httpx.AsyncClient, sid: str) -> str:
    ctx = (await c.get(f"/sessions/{sid}/context")).json()
    texts = [str(m["content"]) for m in ctx["messages"] if m["role"] == "system"]
    heading = HEADINGS["en"]["user_messages"]
    found = [t for t in texts if heading in t]
    assert len(found) == 1, texts
    return found[0]


async def test_user_messages_roll_through_compactions_verbatim(
    uclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    c = uclient
    calls_before = llm.call_count
    assert (await c.put(f"/sessions/{sid}", json=SESSION)).status_code in (200, 201)
    run = [user(TASK), *agent_run(6)]
    for k, planted in enumerate(PLANTED):
        run += [planted.message(), *agent_run(6, first=10 * (k + 1))]
    await _append(c, sid, [*run, *agent_run(20, first=100)])
    carried, s = await _compact(c, sid)
    assert [TASK, *(p.text for p in PLANTED)] == carried[:3], carried

    # A range inside the current turn, with no user message: the previous section stays.
    await _append(c, sid, agent_run(20, first=200))
    before = carried
    carried, s = await _compact(c, sid)
    assert "user" not in await _range_roles(c, sid, s)
    assert carried == before

    # A range whose only user message is larger than the whole share: it folds alone.
    await _append(c, sid, [user(BIG), *agent_run(12, first=300), user(LAST)])
    await _append(c, sid, agent_run(20, first=400))
    carried, s = await _compact(c, sid)
    assert "user" in await _range_roles(c, sid, s)
    assert BIG not in carried
    assert carried[: len(before)] == before, carried
    text = await _payload_summary(c, sid)
    assert s["summary"]["text"] in text  # the payload sends the stored rendering
    for said in before:
        assert said in text  # verbatim, in the text the model reads
    assert all(p.visible_in([{"role": "system", "content": text}]) for p in PLANTED)

    # The share lowered below what the previous summary carries; a range with no user
    # message: the oldest fold, the newest stay, and the section is never emptied.
    lowered = {**SESSION, "compaction": {**SESSION["compaction"], "user_messages_ratio": 0.006}}
    assert (await c.put(f"/sessions/{sid}", json=lowered)).status_code in (200, 201)
    await _append(c, sid, agent_run(20, first=500))
    previous = carried
    carried, s = await _compact(c, sid)
    assert "user" not in await _range_roles(c, sid, s)
    assert 0 < len(carried) < len(previous), (carried, previous)
    assert carried == previous[-len(carried) :]
    assert carried[-1] in await _payload_summary(c, sid)
    # The model wrote the prose of four summaries (none without a model); contextd the section.
    model_path = c.base_url.host.startswith("model")
    assert (llm.call_count - calls_before >= 4) if model_path else llm.call_count == calls_before
