"""Which structured-output form an endpoint accepts, learnt from its refusals (llm.py).

A caller asking for `{"type": "json_object"}` gets, from the highest form down:

1. `json_schema` (strict, the client's schema), where the endpoint supports it;
2. `json_object` carrying the schema in a `schema` key: the extension llama.cpp's
   servers read to constrain their sampling to the schema (a grammar), which a small
   model needs to answer JSON at all; other servers ignore the key or refuse it;
3. plain `json_object`;
4. no `response_format` at all.

A refusal steps one form down and the step is remembered for every later call. A
refusal is a 400 naming the parameter, or a 5xx whose body names it in the words
of a validation error: llama-cpp-python answers a body its pydantic model rejects
(`json_schema` among them) with a 500 quoting the error. A bare 5xx right after a
`json_schema` request (a proxy that hides the body) may be an outage as well as a
refusal: the call's retry, counted as one, goes out one form down, and that step is
remembered only when it happens on calls in a row (a single outage of a provider
that does support `json_schema` must not cost it the strict form for good).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import structlog

log = structlog.get_logger(__name__)

JsonMode = Literal["auto", "json_schema", "json_object", "off"]

# A 400 is about a parameter we can change only if it says the parameter is refused;
# "max_tokens is too large" is about the request, not about the parameter's name.
REFUSED = re.compile(
    r"unsupported|not supported|does not support|unrecognized|unknown|not allowed|"
    r"not permitted|extra|max_completion_tokens",
    re.I,
)
# Words of a validation error, as servers built on pydantic (llama-cpp-python) word it.
INVALID = re.compile(
    r"input should be|literal_error|validation error|not one of|must be one of", re.I
)
_NAMES_FORMAT = re.compile(r"response_format|json_schema|json_object", re.I)
# Calls in a row that met a bare 5xx to json_schema and got an answer one form down,
# before that form is remembered.
BARE_5XX_STRIKES = 2


def sent_type(body: Mapping[str, Any]) -> str | None:
    """The `response_format` type of a request body, if any."""
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    return kind if isinstance(kind, str) else None


class StructuredOutput:
    """The form to send and what the endpoint taught about it (one per model client)."""

    def __init__(
        self,
        mode: JsonMode,
        schema: dict[str, Any] | None,
        schema_name: str,
        *,
        where: Mapping[str, str],
    ) -> None:
        self.auto = mode == "auto"
        self.mode: JsonMode = "json_schema" if self.auto and schema is not None else mode
        if self.mode == "json_schema" and schema is None:
            self.mode = "json_object"
        self.schema = schema
        self.schema_name = schema_name
        # json_object carries the schema until an endpoint refuses the key.
        self.schema_key = schema is not None
        self.bare_5xx_strikes = 0
        self._where = dict(where)

    def form(self) -> str:
        """The form now sent, for log lines and tests."""
        if self.mode == "json_object" and self.schema_key and self.schema is not None:
            return "json_object+schema"
        return self.mode

    def response_format(
        self, asked: Mapping[str, Any] | None, mode: JsonMode | None = None
    ) -> dict[str, Any] | None:
        """What to send for the caller's `asked`, in `mode` (default: the learnt one)."""
        mode = mode or self.mode
        if asked is None or asked.get("type") != "json_object":
            return dict(asked) if asked is not None else None
        if mode == "off":
            return None
        if mode == "json_schema" and self.schema is not None:
            return {
                "type": "json_schema",
                "json_schema": {"name": self.schema_name, "schema": self.schema, "strict": True},
            }
        if self.schema_key and self.schema is not None:
            return {"type": "json_object", "schema": self.schema}
        return {"type": "json_object"}

    def adapt(self, text: str, sent: Mapping[str, Any], *, status: int) -> bool:
        """Step down if the error `text` refuses the `response_format` that was sent."""
        fmt = sent.get("response_format")
        if not (self.auto and isinstance(fmt, dict) and _NAMES_FORMAT.search(text)):
            return False
        if not (INVALID.search(text) or REFUSED.search(text)):
            return False
        if status != 400 and status < 500:
            return False
        if fmt.get("type") == "json_schema":
            self.mode = "json_object"
        elif "schema" in fmt:
            self.schema_key = False
            self.mode = "json_object"
        else:
            self.mode = "off"
        self.bare_5xx_strikes = 0
        self._log(f"status_{status}")
        return True

    def bare_5xx_mode(self, sent: Mapping[str, Any]) -> JsonMode | None:
        """The mode for this call's retry after a bare 5xx to `sent`, or None to keep it."""
        return "json_object" if self.auto and sent_type(sent) == "json_schema" else None

    def answered(self, sent: Mapping[str, Any], call_mode: JsonMode | None) -> None:
        """After an answer: count a bare 5xx that one form down got past."""
        if sent_type(sent) == "json_schema":
            self.bare_5xx_strikes = 0
        elif call_mode is not None and self.mode == "json_schema":
            self.bare_5xx_strikes += 1
            if self.bare_5xx_strikes >= BARE_5XX_STRIKES:
                self.mode = call_mode
                self._log("bare_5xx")

    def _log(self, after: str) -> None:
        log.info("model_endpoint_adapted", **self._where, now=[f"json_mode={self.form()}"],
                 after=after)  # fmt: skip
