"""Pure validation of context requests: every problem becomes a 422 naming its field.

`validate_context_params` checks everything a context request carries at once
and raises one `ValidationFailed` listing each bad field (`loc` like
`tools[0].function.name`). A budget too small for the system block is not an
error: the payload comes back with `over_budget: true`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from app.context.strategies import available_strategies
from app.core.content_parts import part_problems
from app.core.errors import ValidationFailed
from app.core.jsonsafe import sendable_problem
from app.core.limits import FUNCTION_NAME_PATTERN, MODES, PREVIEW_TOKENS_MIN, TOKENS_MAX

_FUNCTION_NAME = re.compile(FUNCTION_NAME_PATTERN)
_JSON_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_DYNAMIC_ROLES = frozenset({"system", "user", "assistant"})

Errors = list[dict[str, str]]


def _err(errors: Errors, loc: str, msg: str) -> None:
    errors.append({"loc": loc, "msg": msg})


def _raise(errors: Errors) -> None:
    if errors:
        raise ValidationFailed(errors)


def validate_strategy(name: object, loc: str = "strategy") -> str:
    known = available_strategies()
    if not isinstance(name, str) or name not in known:
        raise ValidationFailed([{"loc": loc, "msg": f"unknown strategy {name!r}; known: {known}"}])
    return name


def check_tokens(errors: Errors, loc: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _err(errors, loc, "must be an integer")
    elif value < minimum:
        _err(errors, loc, f"must be at least {minimum}")
    elif value > TOKENS_MAX:
        _err(errors, loc, f"must be at most {TOKENS_MAX}")


def check_tools(errors: Errors, tools: object, loc: str = "tools") -> None:
    """Tools must be OpenAI function tools: `{"type": "function", "function": {...}}`."""
    if not isinstance(tools, Sequence) or isinstance(tools, str | bytes):
        _err(errors, loc, "must be a list of tool definitions")
        return
    # Tools are counted, hashed and sent on to a model wherever they come from (a session,
    # a context call, a count): a lone surrogate, a non-finite number or nesting too deep
    # for stored tools is refused here, for all of them.
    unsendable = sendable_problem(tools, loc)
    if unsendable:
        _err(errors, *unsendable)
    names: set[str] = set()
    for i, tool in enumerate(tools):
        at = f"{loc}[{i}]"
        if not isinstance(tool, Mapping):
            _err(errors, at, "must be an object")
            continue
        if tool.get("type") != "function":
            _err(errors, f"{at}.type", 'must be "function"')
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            _err(errors, f"{at}.function", "must be an object with a name")
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
            _err(errors, f"{at}.function.name", f"must match {FUNCTION_NAME_PATTERN}")
        elif name in names:
            _err(errors, f"{at}.function.name", f"duplicate tool name {name!r}")
        else:
            names.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            _err(errors, f"{at}.function.description", "must be a string")
        if "strict" in fn and not isinstance(fn["strict"], bool | None):
            _err(errors, f"{at}.function.strict", "must be a boolean")
        if "parameters" in fn:
            check_schema(errors, fn["parameters"], f"{at}.function.parameters", top=True)


def check_schema(errors: Errors, schema: object, loc: str, *, top: bool = False) -> None:
    """The structural checks that catch malformed tool schemas; not a full meta-schema."""
    if not isinstance(schema, Mapping):
        _err(errors, loc, "must be a JSON Schema object")
        return
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
    # A string first: a list or an object there is unhashable (the lookup was a 500).
    if any(not isinstance(k, str) or k not in _JSON_TYPES for k in kinds):
        _err(errors, f"{loc}.type", f"must be one of {sorted(_JSON_TYPES)}")
    elif top and kind is not None and kind != "object":
        _err(errors, f"{loc}.type", 'function parameters must have type "object"')
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            _err(errors, f"{loc}.properties", "must be an object")
        else:
            for key, sub in props.items():
                check_schema(errors, sub, f"{loc}.properties.{key}")
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(r, str) for r in required)
    ):
        _err(errors, f"{loc}.required", "must be a list of property names")
    if "items" in schema and not isinstance(schema["items"], Mapping | bool):
        _err(errors, f"{loc}.items", "must be a JSON Schema object")


def _check_message(errors: Errors, msg: object, loc: str, roles: frozenset[str]) -> None:
    if not isinstance(msg, Mapping):
        _err(errors, loc, "must be a string or a message object")
        return
    role = msg.get("role")
    if not isinstance(role, str) or role not in roles:  # an object role is unhashable
        _err(errors, f"{loc}.role", f"must be one of {sorted(roles)}")
    content = msg.get("content")
    if not isinstance(content, str | list):
        _err(errors, f"{loc}.content", "must be a string or a list of content parts")
    elif isinstance(content, list):
        if not content:
            _err(errors, f"{loc}.content", "an array of content parts must not be empty")
        for where, problem in part_problems(content, role if isinstance(role, str) else ""):
            _err(errors, f"{loc}.content{where}", problem)
    if msg.get("tool_calls"):
        _err(errors, f"{loc}.tool_calls", "tool calls are not allowed here")


def validate_context_params(
    *,
    strategy: object = None,
    max_tokens: object = None,
    reserve_output_tokens: object = None,
    preview_limit_tokens: object = None,
    tools: object = None,
    system: object = None,
    dynamic_context: object = None,
    mode: object = None,
) -> None:
    """Checks the given (not None) parameters of a context request; raises ValidationFailed."""
    errors: Errors = []
    if strategy is not None:
        try:
            validate_strategy(strategy)
        except ValidationFailed as exc:
            errors.extend(exc.extra["errors"])
    if max_tokens is not None:
        check_tokens(errors, "max_tokens", max_tokens, minimum=1)
    if reserve_output_tokens is not None:
        check_tokens(errors, "reserve_output_tokens", reserve_output_tokens, minimum=0)
        if (
            not errors
            and isinstance(max_tokens, int)
            and isinstance(reserve_output_tokens, int)
            and reserve_output_tokens >= max_tokens
        ):
            _err(errors, "reserve_output_tokens", "must be less than max_tokens")
    if preview_limit_tokens is not None:
        check_tokens(
            errors, "preview_limit_tokens", preview_limit_tokens, minimum=PREVIEW_TOKENS_MIN
        )
    if tools is not None:
        check_tools(errors, tools)
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            _err(errors, "system", "must be a string or a list of system messages")
        else:
            for i, m in enumerate(system):
                _check_message(errors, m, f"system[{i}]", frozenset({"system"}))
    if dynamic_context is not None:
        if not isinstance(dynamic_context, list):
            _err(errors, "dynamic_context", "must be a list of strings or messages")
        else:
            for i, item in enumerate(dynamic_context):
                if not isinstance(item, str):
                    _check_message(errors, item, f"dynamic_context[{i}]", _DYNAMIC_ROLES)
    if mode is not None and mode not in MODES:
        _err(errors, "mode", f"must be one of {list(MODES)}")
    _raise(errors)


def as_tools(tools: Any) -> list[dict[str, Any]]:
    """Validated tools as plain dicts (for callers holding untyped JSON)."""
    errors: Errors = []
    check_tools(errors, tools)
    _raise(errors)
    return [dict(t) for t in tools]


def check_session_default(name: str, value: Any) -> None:
    """A session's default `tools` or `strategy`, held to the context call's rules."""
    if name == "tools":
        as_tools(value)
    elif name == "strategy":
        validate_strategy(value, "strategy")
