"""The summary model's client (app/compaction/model_client.py) against the fake endpoint over a real socket."""

from __future__ import annotations

import json
import time
from email.utils import formatdate
from typing import Any

import pytest
from pydantic import SecretStr

from app.compaction.configured_model import model_client, summary_json_schema
from app.compaction.model_client import (
    ChatModelClient,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelProtocolError,
    ModelRefusal,
    ModelTimeout,
    retry_after_s,
)
from app.core.settings import load_settings
from tests.support.fakellm import FakeLLM, Raw

KEY = "sk-test-SECRET-0123456789"
MESSAGES = [{"role": "user", "content": "hi"}]
JSON_OBJECT = {"type": "json_object"}


def _completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
        **extra,
    }


def _client(llm: FakeLLM, **kwargs: Any) -> ChatModelClient:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("api_key", SecretStr(KEY))
    return ChatModelClient(base_url=llm.base_url + "/", model="m", **kwargs)


# Long enough that no call to the local model times out however busy the machine: a
# test that means a timeout sets its own.
async def _complete(client: ChatModelClient, timeout_s: float = 30.0, **kwargs: Any) -> Any:
    async with client:
        return await client.complete(
            MESSAGES, temperature=0.1, max_tokens=64, timeout_s=timeout_s, **kwargs
        )


async def test_success_sends_the_request_and_reads_usage(llm: FakeLLM) -> None:
    llm.script(Raw(200, _completion({"role": "assistant", "content": "{}"})))
    client = _client(llm, json_mode="json_object")
    result = await _complete(client, response_format=JSON_OBJECT)
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("{}", 11, 7)
    assert result.finish_reason == "stop" and result.model == "m" and result.attempts == 1
    call = llm.calls[0]
    assert call.path == "/v1/chat/completions"
    assert call.headers["authorization"] == f"Bearer {KEY}"
    body = call.body
    assert body["temperature"] == 0.1 and body["max_tokens"] == 64 and body["model"] == "m"
    assert "max_completion_tokens" not in body
    assert body["response_format"] == JSON_OBJECT
    assert KEY not in repr(client)


async def test_content_parts_are_joined_and_missing_usage_is_zero(llm: FakeLLM) -> None:
    data = _completion({"role": "assistant", "content": [{"type": "text", "text": "a"}]})
    del data["usage"]
    llm.script(Raw(200, data))
    result = await _complete(_client(llm))
    assert result.text == "a" and result.prompt_tokens == 0


_ASSISTANT_NONE = {"role": "assistant", "content": None}
FAILURES: list[tuple[str | Raw, type[ModelError]]] = [
    ("timeout", ModelTimeout),
    ("drop_connection", ModelConnectionError),
    (Raw(500, {"error": {"message": f"boom, key was {KEY}"}}), ModelHTTPError),
    (Raw(429, {"error": "rate"}), ModelHTTPError),
    (Raw(404, {"error": "no such model"}), ModelHTTPError),
    (Raw(200, b"<html>garbage"), ModelProtocolError),
    (Raw(200, {"object": "chat.completion"}), ModelProtocolError),
    (Raw(200, {"choices": []}), ModelProtocolError),
    (Raw(200, {"choices": [{"message": None}]}), ModelProtocolError),
    (Raw(200, _completion(_ASSISTANT_NONE)), ModelProtocolError),
    (Raw(200, _completion({**_ASSISTANT_NONE, "refusal": "No."})), ModelRefusal),
    (Raw(200, _completion({**_ASSISTANT_NONE, "content": ""}, "content_filter")), ModelRefusal),
]


@pytest.mark.parametrize(("answer", "error"), FAILURES)
async def test_each_failure_maps_to_its_error_class(
    llm: FakeLLM, answer: str | Raw, error: type[ModelError]
) -> None:
    llm.script(answer)
    # "timeout" never answers, so any limit ends in ModelTimeout: a short one, not the
    # default that keeps busy machines from timing out calls that do answer.
    with pytest.raises(error) as info:
        await _complete(_client(llm), timeout_s=3 if answer == "timeout" else 30)
    assert type(info.value) is error and info.value.code == error.code != ModelError.code
    assert KEY not in str(info.value)
    if isinstance(info.value, ModelHTTPError):
        assert info.value.status in (500, 429, 404)
        assert "***" in str(info.value) or info.value.status != 500
    assert llm.call_count == 1


async def test_no_api_key_sends_no_authorization_header(llm: FakeLLM) -> None:
    await _complete(_client(llm, api_key=None))
    assert "authorization" not in llm.calls[0].headers


async def test_429_with_retry_after_is_waited_out_then_succeeds(llm: FakeLLM) -> None:
    llm.script("429", "429")
    started = time.monotonic()
    result = await _complete(_client(llm, max_retries=2), timeout_s=5)
    elapsed = time.monotonic() - started
    assert [c.behaviour for c in llm.calls] == ["429", "429", "normal"]
    assert result.attempts == 3 and json.loads(result.text)  # the real answer
    # Both Retry-After: 1 honoured (the backoff alone would be under 1.5 s); the upper
    # bound only rules out a stall, with room for a busy machine.
    assert 1.9 <= elapsed < 10


async def test_retries_stop_at_max_retries(llm: FakeLLM) -> None:
    llm.behaviour = "503"
    with pytest.raises(ModelHTTPError) as info:
        await _complete(_client(llm, max_retries=1), timeout_s=5)
    assert info.value.status == 503 and llm.call_count == 2


async def test_a_retry_after_beyond_the_deadline_fails_at_once_with_the_real_error(
    llm: FakeLLM,
) -> None:
    llm.behaviour, llm.retry_after = "429", "120"
    started = time.monotonic()
    with pytest.raises(ModelHTTPError) as info:
        await _complete(_client(llm, max_retries=5), timeout_s=60)
    assert info.value.status == 429 and llm.call_count == 1
    assert time.monotonic() - started < 30  # not the deadline waited out


async def test_retries_never_outlast_the_time_limit(llm: FakeLLM) -> None:
    llm.behaviour = "drop_connection"
    started = time.monotonic()
    with pytest.raises(ModelError):
        await _complete(_client(llm, max_retries=10), timeout_s=3)
    # Ten retries with their backoff would take about 30 s: stopping near the 3 s limit
    # (with room for a busy machine) and after a retry or two is the deadline obeyed.
    assert time.monotonic() - started < 8
    assert 2 <= llm.call_count <= 5


async def test_a_client_error_is_not_retried(llm: FakeLLM) -> None:
    llm.script(Raw(401, {"error": {"message": "bad key"}}))
    with pytest.raises(ModelHTTPError) as info:
        await _complete(_client(llm, max_retries=3))
    assert info.value.status == 401 and llm.call_count == 1


async def test_reasoning_model_is_detected_from_the_400_and_remembered(llm: FakeLLM) -> None:
    llm.reasoning = True
    async with _client(llm) as client:
        first = await client.complete(MESSAGES, temperature=0.1, max_tokens=64, timeout_s=30)
        assert json.loads(first.text)
        second = await client.complete(MESSAGES, temperature=0.1, max_tokens=64, timeout_s=30)
    assert json.loads(second.text) and client.reasoning
    # Two refusals (max_tokens, then the temperature) on the first call, none after.
    assert [c.behaviour for c in llm.calls] == ["rejected", "rejected", "normal", "normal"]
    last = llm.calls[-1].body
    assert last["max_completion_tokens"] == 64
    assert "max_tokens" not in last and "temperature" not in last


@pytest.mark.parametrize("model", ["o3-mini", "gpt-5", "openai/o4-mini"])
async def test_reasoning_models_are_guessed_from_their_name(llm: FakeLLM, model: str) -> None:
    llm.reasoning = True
    async with ChatModelClient(base_url=llm.base_url, model=model, max_retries=0) as client:
        await client.complete(MESSAGES, temperature=0.1, max_tokens=64, timeout_s=2)
    assert [c.behaviour for c in llm.calls] == ["normal"]


async def test_reasoning_false_is_obeyed_even_when_refused(llm: FakeLLM) -> None:
    llm.reasoning = True
    with pytest.raises(ModelHTTPError) as info:
        await _complete(_client(llm, reasoning="false"))
    assert info.value.status == 400 and llm.call_count == 1


async def test_a_classic_endpoint_refusing_max_completion_tokens_gets_max_tokens(
    llm: FakeLLM,
) -> None:
    refusal = {
        "error": {"message": "Unrecognized request argument supplied: max_completion_tokens"}
    }
    llm.script(Raw(400, refusal))
    client = ChatModelClient(base_url=llm.base_url, model="o3-local", max_retries=0)
    assert client.reasoning  # guessed from the name
    result = await _complete(client)
    assert result.text and not client.reasoning
    assert llm.calls[-1].body["max_tokens"] == 64


async def test_json_schema_is_sent_where_supported(llm: FakeLLM) -> None:
    client = _client(llm, json_schema=summary_json_schema(), schema_name="conversation_summary")
    await _complete(client, response_format=JSON_OBJECT)
    fmt = llm.calls[0].body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["name"] == "conversation_summary"
    assert set(fmt["json_schema"]["schema"]["required"]) == {
        "facts", "decisions", "open_todos", "user_prefs", "timeline"
    }  # fmt: skip


async def test_response_format_steps_down_as_the_endpoint_refuses_it(llm: FakeLLM) -> None:
    llm.json_schema = False
    async with _client(llm, json_schema=summary_json_schema()) as client:
        await client.complete(
            MESSAGES, temperature=0, max_tokens=8, timeout_s=2, response_format=JSON_OBJECT
        )
        llm.response_format = False
        await client.complete(
            MESSAGES, temperature=0, max_tokens=8, timeout_s=2, response_format=JSON_OBJECT
        )
        await client.complete(
            MESSAGES, temperature=0, max_tokens=8, timeout_s=2, response_format=JSON_OBJECT
        )
    assert llm.forms() == [
        ("rejected", "json_schema"),
        ("normal", "json_object+schema"),
        ("rejected", "json_object+schema"),
        ("rejected", "json_object"),
        ("normal", None),
        ("normal", None),  # remembered
    ]


async def _summary_call(client: ChatModelClient) -> Any:
    return await client.complete(
        MESSAGES, temperature=0, max_tokens=8, timeout_s=5, response_format=JSON_OBJECT
    )


async def test_a_500_quoting_the_refused_json_schema_steps_down_like_a_400(
    llm: FakeLLM,
) -> None:
    """llama-cpp-python refuses json_schema with a 500 quoting its validation error: the
    step down happens on it (not counted as a retry, even with none allowed), to
    json_object carrying the schema as llama.cpp reads it, and is remembered."""
    llm.llama_cpp = True
    async with _client(llm, json_schema=summary_json_schema()) as client:
        first = await _summary_call(client)
        await _summary_call(client)
        assert client.json_mode == "json_object" and client.json_form == "json_object+schema"
    assert first.text and first.attempts == 2
    assert llm.forms() == [
        ("rejected_500", "json_schema"),
        ("normal", "json_object+schema"),
        ("normal", "json_object+schema"),  # remembered
    ]
    assert llm.calls[1].body["response_format"]["schema"] == summary_json_schema()


async def test_a_500_not_about_the_format_is_an_error_as_before(llm: FakeLLM) -> None:
    """A 500 that names response_format without refusing it, or names nothing, on a
    json_object request, is an outage: retried as is, never a step down."""
    llm.script(Raw(500, {"error": {"message": "boom while applying response_format"}}))
    async with _client(llm, json_mode="json_object", max_retries=1) as client:
        await _summary_call(client)
        assert client.json_mode == "json_object"
    assert [f for _, f in llm.forms()] == ["json_object", "json_object"]


async def test_a_bare_500_to_json_schema_retries_a_step_down_and_remembers_only_twice(
    llm: FakeLLM,
) -> None:
    """A bare 500 may be an outage: the retry (counted) goes out as json_object+schema,
    and the endpoint keeps json_schema until that has happened on two calls in a row."""
    llm.bare_500_to_json_schema = True
    async with _client(llm, json_schema=summary_json_schema(), max_retries=1) as client:
        first = await _summary_call(client)
        assert client.json_mode == "json_schema" and first.attempts == 2
        await _summary_call(client)
        assert client.json_form == "json_object+schema"
        await _summary_call(client)
    assert [f for _, f in llm.forms()] == [
        "json_schema", "json_object+schema",
        "json_schema", "json_object+schema",
        "json_object+schema",  # remembered after the second time
    ]  # fmt: skip


async def test_one_outage_does_not_cost_a_json_schema_endpoint_its_strict_form(
    llm: FakeLLM,
) -> None:
    """Bare 500 (a real outage), then json_schema works again: the strikes are reset."""
    async with _client(llm, json_schema=summary_json_schema(), max_retries=1) as client:
        for _ in range(3):
            llm.script(Raw(500, b"Internal Server Error"))
            await _summary_call(client)
            await _summary_call(client)
        assert client.json_mode == "json_schema"
    assert [f for _, f in llm.forms()] == [
        "json_schema", "json_object+schema", "json_schema",
    ] * 3  # fmt: skip


async def test_without_retries_a_bare_500_is_the_error(llm: FakeLLM) -> None:
    llm.bare_500_to_json_schema = True
    async with _client(llm, json_schema=summary_json_schema(), max_retries=0) as client:
        with pytest.raises(ModelHTTPError) as info:
            await _summary_call(client)
    assert info.value.status == 500 and llm.call_count == 1


async def test_a_fixed_json_mode_never_steps_down(llm: FakeLLM) -> None:
    llm.llama_cpp = True
    async with _client(llm, json_mode="json_schema", json_schema=summary_json_schema()) as c:
        with pytest.raises(ModelHTTPError):
            await _summary_call(c)
        assert c.json_mode == "json_schema"


async def test_an_answer_without_usage_says_so(llm: FakeLLM) -> None:
    llm.usage = False
    async with _client(llm) as client:
        result = await _summary_call(client)
    assert not result.usage_reported and result.prompt_tokens == 0
    llm.usage = True
    async with _client(llm) as client:
        assert (await _summary_call(client)).usage_reported


async def test_a_400_about_the_request_itself_changes_nothing(llm: FakeLLM) -> None:
    too_big = {
        "error": {"message": "max_tokens is too large: 99999. This model supports at most 4096."}
    }
    llm.script(Raw(400, too_big))
    client = _client(llm)
    with pytest.raises(ModelHTTPError):
        await _complete(client)
    assert llm.call_count == 1 and not client.reasoning


async def test_model_client_follows_the_settings(llm: FakeLLM) -> None:
    settings = load_settings(
        llm_base_url=llm.base_url, llm_model="m", llm_reasoning="true", llm_max_retries=1
    )
    async with model_client(settings) as client:
        assert client is not None and client.max_retries == 1
        await client.complete(
            MESSAGES, temperature=0.1, max_tokens=8, timeout_s=2, response_format=JSON_OBJECT
        )
    body = llm.calls[0].body
    assert "temperature" not in body and body["max_completion_tokens"] == 8
    assert body["response_format"]["type"] == "json_schema"
    async with model_client(load_settings(llm_base_url=None)) as none:
        assert none is None


def test_retry_after_forms() -> None:
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after_s({}) is None and retry_after_s({"retry-after": "soon"}) is None
    now = time.time()
    at = retry_after_s({"retry-after": formatdate(now + 10, usegmt=True)}, now=now)
    assert at is not None and 8 <= at <= 11
