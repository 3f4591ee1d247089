"""A minimal client for any OpenAI-compatible `POST /chat/completions` endpoint.

The `httpx.AsyncClient` is injected: the application owns its lifecycle, tests
pass one bound to a local server or an `httpx.MockTransport`.

Exceptions (all carry a stable `code` for job records and metrics):

    ModelError                      anything that means "no usable answer"
    ├── ModelTimeout                no answer within the time limit
    ├── ModelConnectionError        refused, reset or dropped connection
    ├── ModelHTTPError(status)      a non-2xx answer (4xx or 5xx)
    ├── ModelProtocolError          2xx but not a chat completion (garbage, no choices)
    └── ModelRefusal                finish_reason "content_filter" or a `refusal` field

The API key is sent only in the Authorization header; it never appears in an
exception message, a repr or a log line (response excerpts are scrubbed of it
in case a proxy echoes headers back).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import structlog
from pydantic import SecretStr

log = structlog.get_logger(__name__)


class ModelError(Exception):
    code = "model_error"


class ModelTimeout(ModelError):
    code = "model_timeout"


class ModelConnectionError(ModelError):
    code = "model_connection_error"


class ModelHTTPError(ModelError):
    code = "model_http_error"

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"model endpoint answered HTTP {status}: {detail}")
        self.status = status


class ModelProtocolError(ModelError):
    code = "model_protocol_error"


class ModelRefusal(ModelError):
    code = "model_refusal"


@dataclass(frozen=True, slots=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    model: str | None = None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class ChatModelClient:
    """`complete()` one chat request; see the module docstring for what it raises."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        model: str,
        api_key: SecretStr | str | None = None,
    ) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._key = key or None

    def __repr__(self) -> str:
        return f"ChatModelClient(url={self._url!r}, model={self.model!r})"

    def _scrub(self, text: str, limit: int = 200) -> str:
        excerpt = text[:limit]
        return excerpt.replace(self._key, "***") if self._key else excerpt

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        temperature: float,
        max_tokens: int,
        timeout_s: float,
        response_format: dict[str, str] | None = None,
    ) -> ChatResult:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if response_format is not None:
            payload["response_format"] = response_format
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            response = await self._http.post(
                self._url, json=payload, headers=headers, timeout=httpx.Timeout(timeout_s)
            )
        except httpx.TimeoutException as exc:
            raise ModelTimeout(f"no answer from the model within {timeout_s:g}s") from exc
        except httpx.TransportError as exc:
            # str(exc) is the transport's own message; it never holds request headers.
            raise ModelConnectionError(f"{type(exc).__name__}: {self._scrub(str(exc))}") from exc
        if response.status_code >= 400:
            log.warning("model_http_error", status=response.status_code, url=self._url)
            raise ModelHTTPError(response.status_code, self._scrub(response.text))
        return self._parse(response)

    def _parse(self, response: httpx.Response) -> ChatResult:
        try:
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelProtocolError(
                f"answer is not JSON: {self._scrub(response.text, 80)!r}"
            ) from exc
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ModelProtocolError("answer has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ModelProtocolError("first choice has no message")
        finish = choice.get("finish_reason")
        finish_reason = finish if isinstance(finish, str) else None
        refusal = message.get("refusal")
        if finish_reason == "content_filter" or (isinstance(refusal, str) and refusal.strip()):
            raise ModelRefusal(
                self._scrub(refusal if isinstance(refusal, str) else "content_filter")
            )
        content = message.get("content")
        if isinstance(content, list):  # content parts, as some servers answer
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise ModelProtocolError("first choice has no text content")
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ChatResult(
            text=content,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            finish_reason=finish_reason,
            model=data.get("model") if isinstance(data.get("model"), str) else None,
        )
