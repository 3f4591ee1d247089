"""Compaction through an unreliable or picky model endpoint (issue 10 item 5): real
database, real HTTP fake model server, the app's own model client."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from tests.support.apps import app_client, model_settings
from tests.support.compaction_http import SMALL_COMPACTION, compact, long_session, state
from tests.support.fakellm import FakeLLM

PATIENT = {"compaction": {**SMALL_COMPACTION, "compact_timeout_s": 6.0}}


@pytest.fixture(scope="module")
async def client(
    llm: FakeLLM, make_database: Callable[[], str]
) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(model_settings(llm.base_url, 6.0), make_database(), "http://t") as c:
        yield c


def summary_calls(llm: FakeLLM) -> list[Any]:
    return [c for c in llm.calls if c.path.endswith("/chat/completions")]


# First: the app's one model client remembers what an endpoint refused, and a later
# test here makes it refuse json_schema.
async def test_structured_output_is_asked_for(
    client: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(client, sid, settings=PATIENT)
    done = await compact(client, sid)
    assert done["status"] == "success", done
    fmt = summary_calls(llm)[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "conversation_summary"


async def test_rate_limited_twice_then_answered_is_a_model_summary(
    client: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(client, sid, settings=PATIENT)
    llm.script("429", "429")
    started = time.monotonic()
    done = await compact(client, sid)
    assert done["status"] == "success", done
    assert time.monotonic() - started >= 1.9  # Retry-After: 1, twice
    assert [c.behaviour for c in summary_calls(llm)] == ["429", "429", "normal"]
    s = await state(client, sid)
    assert s["last_compaction_seq"] == done["watermark_after"] > 0
    assert "never deploy on Fridays" in s["summary"]["text"]


async def test_a_reasoning_model_endpoint_gives_a_model_summary(
    client: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    llm.reasoning, llm.json_schema = True, False
    await long_session(client, sid, settings=PATIENT)
    done = await compact(client, sid)
    assert done["status"] == "success", done
    accepted = [c.body for c in summary_calls(llm) if c.behaviour == "normal"]
    assert accepted and all(
        "max_tokens" not in b and "temperature" not in b and b["max_completion_tokens"] > 0
        for b in accepted
    )
    # json_schema refused: json_object, with the schema in llama.cpp's `schema` key.
    assert accepted[-1]["response_format"]["type"] == "json_object"
    assert set(accepted[-1]["response_format"]["schema"]["required"]) >= {"facts", "timeline"}


async def test_rate_limited_beyond_the_time_limit_degrades_promptly(
    client: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    llm.behaviour, llm.retry_after = "429", "60"
    await long_session(client, sid, settings=PATIENT)
    started = time.monotonic()
    done = await compact(client, sid)
    assert done["status"] == "degraded", done
    assert time.monotonic() - started < 5  # no 60 s sleep, no waiting out the 6 s limit
    assert "never deploy on Fridays" in (await state(client, sid))["summary"]["text"]
