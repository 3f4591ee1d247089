"""Compaction through an endpoint like llama.cpp's serving a small model (issue 38 part 6):
json_schema refused with a 500, answers wrapped in prose with sections of the wrong
shape, no `usage`. Real database, real HTTP model server (tests/support/fakellm.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.support.apps import app_client, model_settings
from tests.support.compaction_http import CONSTRAINT, compact, long_session, state
from tests.support.fakellm import FakeLLM

pytestmark = pytest.mark.fake_llm(llama_cpp=True, usage=False)


@pytest.fixture
async def cclient(
    llm: FakeLLM, make_database: Callable[[], str]
) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(model_settings(llm.base_url, 5.0), make_database(), "http://s.test") as c:
        yield c


async def test_a_500_to_json_schema_steps_down_once_per_endpoint_and_jobs_succeed(
    cclient: httpx.AsyncClient, llm: FakeLLM
) -> None:
    llm.behaviour = "sloppy"
    for sid in ("small-a", "small-b"):
        await long_session(cclient, sid)
        done = await compact(cclient, sid)
        assert done["status"] == "success", done
        meta = done["compaction_metadata"]
        assert meta["summarizer"] == "model", meta
        # No usage in the answers: the summariser's tokens are counted here instead.
        assert meta["model_prompt_tokens"] > 0 and meta["model_completion_tokens"] > 0, meta
        text = (await state(cclient, sid))["summary"]["text"]
        assert CONSTRAINT in text
        assert "step: " in text  # the model's items as objects, taken as text
    assert llm.forms() == [
        ("rejected_500", "json_schema"),
        ("sloppy", "json_object+schema"),
        ("sloppy", "json_object+schema"),  # the step down is remembered by the endpoint
    ]


@pytest.mark.parametrize("behaviour", ["garbage", "not_json", "truncate", "wrong_types"])
async def test_what_a_small_model_cannot_parse_degrades_and_never_fails(
    cclient: httpx.AsyncClient, llm: FakeLLM, behaviour: str
) -> None:
    llm.behaviour = behaviour
    await long_session(cclient, "small-bad")
    done = await compact(cclient, "small-bad")
    assert done["status"] == "degraded", done
    assert done["compaction_metadata"]["summarizer"] == "extractive"
    s = await state(cclient, "small-bad")
    assert s["last_compaction_seq"] > 0 and CONSTRAINT in s["summary"]["text"]
