"""The summary model's client: any OpenAI-compatible `POST /chat/completions`, over the
official `openai` SDK (`AsyncOpenAI(base_url=…)`).

What it adds to the SDK, and why:

- **Retries bounded by the caller's time limit.** 429, 408, 409, 5xx and transport
  errors are retried (`max_retries`), waiting what `Retry-After`/`Retry-After-Ms`
  asks for, else an exponential backoff with jitter. The SDK's own retry loop is off
  (`max_retries=0` on the SDK client): it cannot know the compaction's deadline, so it
  would sleep through a 30 s `Retry-After` and the job would end in a timeout instead
  of the real error. Here every attempt gets only the time that is left, and a wait
  that would not fit gives up at once with the endpoint's own answer.
- **Reasoning models.** They reject `max_tokens` (wanting `max_completion_tokens`)
  and any temperature. `reasoning="true"` sends the reasoning form, `"false"` the
  classic one; `"auto"` starts from the model's name (o1/o3/o4/gpt-5…) and, when the
  endpoint answers 400 naming one of those parameters, switches and remembers it for
  every later call of this client (the retry after such a switch is not counted).
- **Structured output.** A caller asking for `{"type": "json_object"}` gets
  `json_schema` (strict, the schema given to the client) where the endpoint supports
  it; a refusal steps down (`json_object` with the schema as llama.cpp reads it, plain
  `json_object`, nothing), again remembered: see `json_mode.py`, which also says what
  counts as a refusal (a 400, or a 5xx naming the parameter) and what a bare 5xx does.
  The answer is parsed here by hand (not by the SDK's models), so the lenient summary
  parser downstream still sees whatever text came back; `usage_reported` says whether
  the endpoint counted the tokens (llama.cpp's streams and some proxies do not).

Exceptions (all carry a stable `code` for job records and metrics):

    ModelError                      anything that means "no usable answer"
    ├── ModelTimeout                no answer within the time limit
    ├── ModelConnectionError        refused, reset or dropped connection
    ├── ModelHTTPError(status)      a non-2xx answer (4xx or 5xx), after any retries
    ├── ModelProtocolError          2xx but not a chat completion (garbage, no choices)
    └── ModelRefusal                finish_reason "content_filter" or a `refusal` field

The API key is sent only in the Authorization header; it never appears in an
exception message, a repr or a log line (response excerpts are scrubbed of it
in case a proxy echoes headers back).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import structlog
from pydantic import SecretStr

from app.compaction.json_mode import REFUSED, JsonMode, StructuredOutput

log = structlog.get_logger(__name__)

Reasoning = Literal["auto", "true", "false"]

# Sent when no key is configured: the SDK insists on one. The Authorization header
# is then omitted from every request, so this never reaches the endpoint.
_NO_KEY = "contextd-no-api-key"
_REASONING_MODEL = re.compile(r"^(?:[\w.-]+/)?(?:o\d|gpt-5)", re.I)
_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_ADAPTATIONS = 4
_BACKOFF_BASE_S = 0.5
_BACKOFF_CAP_S = 8.0


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
    attempts: int = 1
    # False when the answer had no `usage`: the counts are then 0, for the caller to
    # estimate.
    usage_reported: bool = True


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked to wait (`Retry-After-Ms`, `Retry-After` seconds or date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ChatModelClient:
    """`complete()` one chat request; see the module docstring for what it does and raises.

    One instance lives as long as the application (it holds the SDK's connection
    pool and what it learnt about the endpoint); close it with `aclose()` or use it
    as an async context manager.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: SecretStr | str | None = None,
        max_retries: int = 2,
        reasoning: Reasoning = "auto",
        json_mode: JsonMode = "auto",
        json_schema: dict[str, Any] | None = None,
        schema_name: str = "response",
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        self._key = key or None
        self.max_retries = max_retries
        # Imported here, not with the module: importing the SDK builds all of its types,
        # CPU that a process with no model configured (extractive summaries) need not pay.
        import openai

        self._sdk = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self._key or _NO_KEY,
            max_retries=0,  # ours instead: see the module docstring
            timeout=60.0,  # replaced per request by the time left
        )
        self._headers: dict[str, Any] = {} if self._key else {"Authorization": openai.Omit()}
        self._reasoning_auto = reasoning == "auto"
        self.reasoning = reasoning == "true" or (
            self._reasoning_auto and bool(_REASONING_MODEL.match(model))
        )
        self._temperature_ok = not self.reasoning
        self._format = StructuredOutput(
            json_mode, json_schema, schema_name, where={"url": self.base_url, "model": model}
        )

    def __repr__(self) -> str:
        return f"ChatModelClient(url={self.base_url!r}, model={self.model!r})"

    async def aclose(self) -> None:
        await self._sdk.close()

    async def __aenter__(self) -> ChatModelClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _scrub(self, text: str, limit: int = 200) -> str:
        excerpt = text[:limit]
        return excerpt.replace(self._key, "***") if self._key else excerpt

    @property
    def json_mode(self) -> JsonMode:
        """The structured-output mode now sent (learnt from the endpoint's refusals)."""
        return self._format.mode

    @property
    def json_form(self) -> str:
        """`json_mode`, with `json_object+schema` when json_object carries the schema."""
        return self._format.form()

    def _request(
        self,
        messages: Sequence[dict[str, Any]],
        temperature: float,
        max_tokens: int,
        response_format: Mapping[str, Any] | None,
        mode: JsonMode | None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if self.reasoning:
            body["max_completion_tokens"] = max_tokens
        else:
            body["max_tokens"] = max_tokens
        if self._temperature_ok:
            body["temperature"] = temperature
        fmt = self._format.response_format(response_format, mode)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    def _adapt(self, error_text: str, sent: Mapping[str, Any], status: int) -> bool:
        """Learn from a refusal that names a parameter we sent; True if the request changes.
        A 5xx is read only for `response_format` (see json_mode.py)."""
        text = error_text.lower()
        if status != 400:
            return self._format.adapt(text, sent, status=status)
        stepped = self._format.adapt(text, sent, status=status)  # logs its own step
        changed: list[str] = []
        if not REFUSED.search(text):
            return stepped
        if self._reasoning_auto:
            if "max_tokens" in sent and re.search(r"\bmax_tokens\b", text):
                self.reasoning = True
                changed.append("max_completion_tokens")
            elif "max_completion_tokens" in sent and "max_completion_tokens" in text:
                self.reasoning = False
                changed.append("max_tokens")
            if "temperature" in sent and "temperature" in text:
                self._temperature_ok = False
                changed.append("no_temperature")
        if changed:
            log.info("model_endpoint_adapted", url=self.base_url, model=self.model, now=changed)
        return stepped or bool(changed)

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        temperature: float,
        max_tokens: int,
        timeout_s: float,
        response_format: dict[str, str] | None = None,
    ) -> ChatResult:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        retries = adaptations = 0
        call_mode: JsonMode | None = None  # this call's own step down after a bare 5xx
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise ModelTimeout(f"no answer from the model within {timeout_s:g}s")
            body = self._request(messages, temperature, max_tokens, response_format, call_mode)
            wait: float | None = None
            import openai  # already loaded by __init__: a lookup in sys.modules

            try:
                raw = await self._sdk.chat.completions.with_raw_response.create(
                    **body, timeout=left, extra_headers=self._headers
                )
            except openai.APITimeoutError as exc:
                raise ModelTimeout(f"no answer from the model within {timeout_s:g}s") from exc
            except openai.APIConnectionError as exc:
                cause = exc.__cause__ or exc
                error: ModelError = ModelConnectionError(
                    f"{type(cause).__name__}: {self._scrub(str(cause))}"
                )
            except openai.APIStatusError as exc:
                status, text = exc.status_code, self._text(exc.response)
                refusal = status == 400 or status >= 500
                if refusal and adaptations < _MAX_ADAPTATIONS and self._adapt(text, body, status):
                    adaptations += 1
                    call_mode = None
                    continue
                log.warning("model_http_error", status=status, url=self.base_url, retry=retries)
                error = ModelHTTPError(status, self._scrub(text))
                if status not in _RETRY_STATUSES and status < 500:
                    raise error from None
                if status >= 500 and call_mode is None:
                    call_mode = self._format.bare_5xx_mode(body)
                wait = retry_after_s(exc.response.headers)
            else:
                self._format.answered(body, call_mode)
                return self._parse(raw.http_response, attempts=retries + adaptations + 1)
            if retries >= self.max_retries:
                raise error
            if wait is None:
                wait = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**retries) * random.uniform(0.75, 1)
            if wait >= deadline - loop.time():
                # Waiting would outlast the caller's limit: the endpoint's answer is the
                # honest error, not a timeout we would run into.
                raise error
            await asyncio.sleep(wait)
            retries += 1

    @staticmethod
    def _text(response: Any) -> str:
        try:
            return str(response.text)
        except Exception:  # a streamed or undecodable body: the status says enough
            return ""

    def _parse(self, response: Any, *, attempts: int = 1) -> ChatResult:
        try:
            data = json.loads(response.content)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelProtocolError(
                f"answer is not JSON: {self._scrub(self._text(response), 80)!r}"
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
            # Joined with nothing, unlike a logged message's content_text: these
            # are pieces of one answer (the summary's JSON), not separate texts.
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise ModelProtocolError("first choice has no text content")
        reported = isinstance(data.get("usage"), dict)
        usage = data["usage"] if reported else {}
        return ChatResult(
            text=content,
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            finish_reason=finish_reason,
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            attempts=attempts,
            usage_reported=reported,
        )
