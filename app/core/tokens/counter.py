"""Token counts of OpenAI chat messages and tool schemas, exact or estimated.

Exact counters run tiktoken (o200k_base, cl100k_base) over the text that reaches
the model and add the chat format's fixed framing; "estimate" applies the same
framing to a cheap character-class estimate for models without a public
tokenizer. Every constant below is a documented approximation of framing the
API does not expose; the text itself is counted exactly in exact mode.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol

from app.core.tokens.encodings import get_encoding
from app.core.tokens.models import TokenizerName, tokenizer_for_model

# OpenAI cookbook ("How to count tokens with tiktoken"), for every chat model
# since gpt-3.5-turbo-0613: <|start|>{role}<|message|>{content}<|end|> costs 3
# beyond role and content, a `name` one more, and every reply is primed with
# <|start|>assistant<|message|>, 3 tokens counted once per request.
TOKENS_PER_MESSAGE: Final = 3
TOKENS_PER_NAME: Final = 1
REPLY_PRIMING: Final = 3

# A call is rendered as its function name, its arguments and some framing. A
# lone call costs ~3 tokens of framing (hmarr/openai-chat-tokens, measured
# against the API); parallel calls are wrapped as
# {"recipient_name":"functions.<name>","parameters":<arguments>}, 9 tokens in
# both encodings. We take the larger so that budgets hold either way.
TOOL_CALL_OVERHEAD: Final = 9

# Images are billed by size (gpt-4o: 85 + 170 per 512 px tile). The size is
# unknown without fetching the image, so low detail is exact and anything else
# is charged as a 1024x1024 high-detail image (4 tiles).
IMAGE_LOW_DETAIL_TOKENS: Final = 85
IMAGE_DEFAULT_TOKENS: Final = 85 + 170 * 4

# Tool schemas: OpenAI renders them as a TypeScript-like namespace inside the
# system prompt and does not publish the format. The cookbook's function-calling
# section counts name:description per function and name:type:description per
# property plus these fixed overheads, fitted against the API for gpt-4o
# (FUNC_INIT 7) and gpt-4/gpt-3.5 (10). The text is tokenized exactly; the
# framing is approximate, within a few tokens per function.
FUNC_INIT_O200K: Final = 7
FUNC_INIT_CL100K: Final = 10
PROP_INIT: Final = 3
PROP_KEY: Final = 3
ENUM_INIT: Final = -3
ENUM_ITEM: Final = 3
FUNC_END: Final = 12
_SCHEMA_MODELLED: Final = frozenset(
    {
        "type",
        "description",
        "properties",
        "items",
        "enum",
        "required",
        "title",
        "additionalProperties",
    }
)


class TextCounter(Protocol):
    """The one count a summary's checks need: tests and tools pass small doubles."""

    def count_text(self, text: str) -> int: ...


class TokenCounter(Protocol):
    """Counts what a request costs in one tokenizer; pure, thread-safe, cheap to share."""

    mode: Literal["exact", "estimate"]
    name: str  # "o200k_base" | "cl100k_base" | "estimate"

    def count_text(self, text: str) -> int:
        """Tokens of bare text; special-token markers inside it count as ordinary text."""
        ...

    def count_message(self, message: Mapping[str, Any]) -> int:
        """Tokens of one OpenAI chat message, framing included (not the reply priming)."""
        ...

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Sum of count_message plus REPLY_PRIMING, which counts even for no messages:
        a request always primes the reply, so [] costs REPLY_PRIMING."""
        ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of the tool (function) schemas sent with a request; 0 for []."""
        ...


def _json(value: Any) -> str:
    # Compact and unescaped, close to what a client serialises; never raises.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# --- estimate -----------------------------------------------------------------
# chars/4 counts English about right but Chinese at ~0.4 of o200k_base: one
# ideograph is ~0.8-1 token, not 1/4. The estimate walks the text once with a
# regex that mimics o200k's pre-tokenizer and charges each piece by its class.
# Weights were fitted on the shared conversation dataset (sessions.jsonl) against o200k_base
# to overcount a little (aggregate ~1.1x) rather than risk a blown budget;
# non-OpenAI tokenizers are seldom more compact than o200k.
_CJK: Final = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3200-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff"
)
_PIECES: Final = re.compile(
    # Each group is one piece class; _CHARS_PER_TOKEN below is indexed by group number.
    # 1. CJK ideographs, kana, hangul, full-width forms: one token each (o200k:
    #    ~0.8 for Chinese prose, ~0.6 for Japanese and Korean).
    rf"([{_CJK}])"
    # 2. Base64, hashes, ids: runs mixing letters and digits, ~1.5 chars/token.
    r"|((?=[0-9]*[A-Za-z])(?=[A-Za-z]*[0-9])[A-Za-z0-9]{20,})"
    # 3. ASCII words with their leading space, split on case changes as o200k
    #    does; common words are one token however long.
    r"|( ?[A-Z]*[a-z]+| ?[A-Z]+)"
    # 4. Other scripts (Cyrillic, Arabic, Devanagari, Thai, accented Latin).
    rf"|( ?[^\W\d_A-Za-z{_CJK}]+)"
    # 5. Digits, which o200k groups by three.
    r"|(\d+)"
    # 6. ASCII punctuation runs (`": "`, `()`, `==`) merge into few tokens.
    r"|( ?[!-/:-@\[-`{-~]+)"
    # 7. Newlines and indentation compress well.
    r"|(\s+)"
    # 8. Emoji and other symbols.
    r"|(.)",
    re.DOTALL,
)
_CHARS_PER_TOKEN: Final = (1.0, 1.0, 1.5, 8.0, 2.5, 3.0, 3.0, 16.0, 1.0)


def estimate_tokens(text: str) -> int:
    """A cheap, slightly high token count for text of an unknown tokenizer."""
    per_token = _CHARS_PER_TOKEN
    ceil = math.ceil
    return sum(
        [ceil((m.end() - m.start()) / per_token[m.lastindex or 0]) for m in _PIECES.finditer(text)]
    )


class _Counter:
    """The framing logic shared by every tokenizer; only the text count differs."""

    __slots__ = ("_func_init", "_roles", "_text", "mode", "name")

    def __init__(self, name: TokenizerName, text: Callable[[str], int], func_init: int) -> None:
        self.mode: Literal["exact", "estimate"] = "estimate" if name == "estimate" else "exact"
        self.name: str = name
        self._text = text
        self._func_init = func_init
        # Role strings repeat on every message; a lookup saves an encode call each.
        self._roles = {r: text(r) for r in ("system", "developer", "user", "assistant", "tool")}

    def count_text(self, text: str) -> int:
        return self._text(text)

    def _value(self, value: Any) -> int:
        if value is None:
            return 0
        return self._text(value if isinstance(value, str) else _json(value))

    def count_message(self, message: Mapping[str, Any]) -> int:
        total = TOKENS_PER_MESSAGE
        for key, value in message.items():
            if key == "content":
                total += self._content(value)
            elif key == "tool_calls" and isinstance(value, list):
                total += sum(self._tool_call(call) for call in value)
            elif key == "function_call" and isinstance(value, Mapping):
                total += self._call_body(value)
            elif key == "role" and isinstance(value, str) and value in self._roles:
                total += self._roles[value]
            else:
                # name, tool_call_id, refusal and any field a client adds reach the model.
                total += self._value(value)
                if key == "name" and value is not None:
                    total += TOKENS_PER_NAME
        return total

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int:
        return sum(self.count_message(m) for m in messages) + REPLY_PRIMING

    def _content(self, content: Any) -> int:
        if isinstance(content, str):
            return self._text(content)
        if isinstance(content, list):
            return sum(self._part(part) for part in content)
        return self._value(content)

    def _part(self, part: Any) -> int:
        if not isinstance(part, Mapping):
            return self._value(part)
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            return self._text(part["text"])
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return self._text(part["refusal"])
        if kind == "image_url":
            image = part.get("image_url")
            low = isinstance(image, Mapping) and image.get("detail") == "low"
            return IMAGE_LOW_DETAIL_TOKENS if low else IMAGE_DEFAULT_TOKENS
        # Audio, files and future part types: their JSON is what we can see of them.
        return self._value(part)

    def _tool_call(self, call: Any) -> int:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            return TOOL_CALL_OVERHEAD + self._value(call)
        # The call id is protocol bookkeeping that the model is not shown.
        return self._call_body(function)

    def _call_body(self, function: Mapping[str, Any]) -> int:
        return (
            TOOL_CALL_OVERHEAD
            + self._value(function.get("name"))
            + self._value(function.get("arguments"))
        )

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int:
        if not tools:
            return 0
        return FUNC_END + sum(self._tool(tool) for tool in tools)

    def _tool(self, tool: Mapping[str, Any]) -> int:
        # Chat Completions nests the definition under "function"; the legacy
        # `functions` list and the Responses API put it at the top level.
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            return self._func_init + self._value(tool)
        description = function.get("description")
        description = description if isinstance(description, str) else ""
        total = self._func_init + self._text(f"{function['name']}:{description.removesuffix('.')}")
        parameters = function.get("parameters")
        if isinstance(parameters, Mapping):
            total += self._properties(parameters) + self._schema_rest(parameters)
        return total

    def _properties(self, schema: Mapping[str, Any]) -> int:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            return 0
        return PROP_INIT + sum(
            PROP_KEY + self._property(str(key), prop) for key, prop in properties.items()
        )

    def _property(self, key: str, prop: Any) -> int:
        if not isinstance(prop, Mapping):
            return self._text(f"{key}:{_json(prop)}")
        kind = prop.get("type", "")
        description = prop.get("description")
        description = description if isinstance(description, str) else ""
        kind_text = kind if isinstance(kind, str) else _json(kind)
        total = self._text(f"{key}:{kind_text}:{description.removesuffix('.')}")
        enum = prop.get("enum")
        if isinstance(enum, list) and enum:
            # ENUM_INIT is negative, but the first item's ENUM_ITEM outweighs it, so an
            # enum never lowers the count.
            total += ENUM_INIT + sum(ENUM_ITEM + self._value(item) for item in enum)
        items = prop.get("items")
        if isinstance(items, Mapping):
            total += self._property("", items)
        return total + self._properties(prop) + self._schema_rest(prop)

    def _schema_rest(self, schema: Mapping[str, Any]) -> int:
        # Keywords the cookbook formula ignores (anyOf, default, format, $defs, …) are
        # rendered somehow; their JSON keeps big schemas from looking free.
        rest = {k: v for k, v in schema.items() if k not in _SCHEMA_MODELLED}
        return self._value(rest) if rest else 0


@functools.cache
def _counter_for(tokenizer: TokenizerName) -> TokenCounter:
    if tokenizer == "estimate":
        # The unknown model's function framing is unknown too: take the larger constant.
        return _Counter("estimate", estimate_tokens, FUNC_INIT_CL100K)
    encode = get_encoding(tokenizer).encode_ordinary
    func_init = FUNC_INIT_O200K if tokenizer == "o200k_base" else FUNC_INIT_CL100K
    return _Counter(tokenizer, lambda text: len(encode(text)), func_init)


def get_counter(model: str | None) -> TokenCounter:
    """The counter for `model`'s tokenizer, shared per tokenizer for the process."""
    return _counter_for(tokenizer_for_model(model))
