from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.compaction.llm import (
    ChatModelClient,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelProtocolError,
    ModelRefusal,
    ModelTimeout,
)

KEY = "sk-test-SECRET-0123456789"
MESSAGES = [{"role": "user", "content": "hi"}]


def _completion(message: dict[str, Any], finish: str = "stop", **extra: Any) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
        **extra,
    }


def _client(handler: Callable[[httpx.Request], httpx.Response]) -> ChatModelClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ChatModelClient(http, base_url="http://llm.test/v1/", model="m", api_key=SecretStr(KEY))


async def _complete(client: ChatModelClient) -> Any:
    return await client.complete(MESSAGES, temperature=0.1, max_tokens=64, timeout_s=1.0)


async def test_success_sends_the_request_and_reads_usage() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=_completion({"role": "assistant", "content": "{}"}))

    client = _client(handler)
    result = await client.complete(
        MESSAGES, temperature=0.1, max_tokens=64, timeout_s=1.0,
        response_format={"type": "json_object"},
    )  # fmt: skip
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("{}", 11, 7)
    assert result.finish_reason == "stop" and result.model == "m"
    request = seen[0]
    assert str(request.url) == "http://llm.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(request.content)
    assert body["temperature"] == 0.1 and body["max_tokens"] == 64 and body["model"] == "m"
    assert body["response_format"] == {"type": "json_object"}
    assert KEY not in repr(client)


async def test_content_parts_are_joined_and_missing_usage_is_zero() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        data = _completion({"role": "assistant", "content": [{"type": "text", "text": "a"}]})
        del data["usage"]
        return httpx.Response(200, json=data)

    result = await _complete(_client(handler))
    assert result.text == "a" and result.prompt_tokens == 0


def _raise(exc: Exception) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


def _respond(status: int, body: Any) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)

    return handler


_ASSISTANT_NONE = {"role": "assistant", "content": None}
FAILURES: list[tuple[Callable[[httpx.Request], httpx.Response], type[ModelError]]] = [
    (_raise(httpx.ReadTimeout("slow")), ModelTimeout),
    (_raise(httpx.ConnectError("refused")), ModelConnectionError),
    (_raise(httpx.RemoteProtocolError("dropped")), ModelConnectionError),
    (_respond(500, {"error": {"message": f"boom, key was {KEY}"}}), ModelHTTPError),
    (_respond(429, {"error": "rate"}), ModelHTTPError),
    (_respond(200, b"<html>garbage"), ModelProtocolError),
    (_respond(200, {"object": "chat.completion"}), ModelProtocolError),
    (_respond(200, {"choices": []}), ModelProtocolError),
    (_respond(200, {"choices": [{"message": None}]}), ModelProtocolError),
    (_respond(200, _completion(_ASSISTANT_NONE)), ModelProtocolError),
    (_respond(200, _completion({**_ASSISTANT_NONE, "refusal": "No."})), ModelRefusal),
    (
        _respond(200, _completion({**_ASSISTANT_NONE, "content": ""}, "content_filter")),
        ModelRefusal,
    ),
]


@pytest.mark.parametrize(("handler", "error"), FAILURES)
async def test_each_failure_maps_to_its_error_class(
    handler: Callable[[httpx.Request], httpx.Response], error: type[ModelError]
) -> None:
    with pytest.raises(error) as info:
        await _complete(_client(handler))
    assert type(info.value) is error and info.value.code == error.code != ModelError.code
    assert KEY not in str(info.value)
    if isinstance(info.value, ModelHTTPError):
        assert info.value.status in (500, 429)
        assert "***" in str(info.value) or info.value.status == 429


async def test_no_api_key_sends_no_authorization_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=_completion({"role": "assistant", "content": "x"}))

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    await ChatModelClient(http, base_url="http://llm.test/v1", model="m").complete(
        MESSAGES, temperature=0, max_tokens=8, timeout_s=1
    )
    assert "authorization" not in seen[0].headers
