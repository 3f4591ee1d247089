"""Request validation: every bad field is a 422 naming it."""

from __future__ import annotations

from typing import Any

import pytest

from app.context import validate_context_params, validate_strategy
from app.context.validation import as_tools
from app.core.errors import ValidationFailed
from app.core.limits import TOKENS_MAX

GOOD_TOOL = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "lines": {"type": "array"}},
            "required": ["path"],
        },
    },
}


def locs(**params: Any) -> list[str]:
    with pytest.raises(ValidationFailed) as info:
        validate_context_params(**params)
    assert info.value.status == 422 and info.value.code == "validation_error"
    return [e["loc"] for e in info.value.extra["errors"]]


def test_valid_requests_pass() -> None:
    validate_context_params(
        strategy="summary",
        max_tokens=8000,
        reserve_output_tokens=1000,
        preview_limit_tokens=512,
        tools=[GOOD_TOOL, {"type": "function", "function": {"name": "noargs"}}],
        system=[{"role": "system", "content": "x"}],
        dynamic_context=["goal", {"role": "user", "content": "doc"}],
        mode="agent",
    )
    assert validate_strategy("key_messages") == "key_messages"
    assert as_tools([GOOD_TOOL]) == [GOOD_TOOL]


def test_unknown_strategy() -> None:
    assert locs(strategy="best") == ["strategy"]


@pytest.mark.parametrize("value", [0, -5, TOKENS_MAX + 1, "100", 1.5, True])
def test_budgets_must_be_sane_integers(value: Any) -> None:
    assert locs(max_tokens=value) == ["max_tokens"]


def test_reserve_must_leave_room() -> None:
    assert locs(max_tokens=1000, reserve_output_tokens=1000) == ["reserve_output_tokens"]
    assert locs(reserve_output_tokens=-1) == ["reserve_output_tokens"]
    assert locs(preview_limit_tokens=10) == ["preview_limit_tokens"]


def test_tools_name_the_exact_field() -> None:
    bad = [
        GOOD_TOOL,
        {"type": "retrieval"},
        {"type": "function", "function": {"name": "has space"}},
        {"type": "function", "function": {"name": "read_file"}},
        {"type": "function", "function": {"name": "f", "description": 3}},
        {"type": "function", "function": {"name": "g", "parameters": {"type": "string"}}},
        {
            "type": "function",
            "function": {
                "name": "h",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "strin"}},
                    "required": "a",
                },
            },
        },
        "not a tool",
    ]
    assert locs(tools=bad) == [
        "tools[1].type",
        "tools[1].function",
        "tools[2].function.name",
        "tools[3].function.name",
        "tools[4].function.description",
        "tools[5].function.parameters.type",
        "tools[6].function.parameters.properties.a.type",
        "tools[6].function.parameters.required",
        "tools[7]",
    ]
    assert locs(tools={"a": 1}) == ["tools"]
    with pytest.raises(ValidationFailed):
        as_tools([{"type": "function", "function": {"name": "x" * 65}}])


def test_system_dynamic_and_mode() -> None:
    assert locs(system=[{"role": "user", "content": "x"}]) == ["system[0].role"]
    assert locs(system=3) == ["system"]
    assert locs(
        dynamic_context=["ok", {"role": "tool", "content": "x"}, {"role": "assistant",
                         "content": None, "tool_calls": [{"id": "c"}]}]
    ) == [
        "dynamic_context[1].role",
        "dynamic_context[2].content",
        "dynamic_context[2].tool_calls",
    ]  # fmt: skip
    assert locs(mode="turbo") == ["mode"]


def test_all_errors_at_once() -> None:
    assert locs(strategy="x", max_tokens=-1, mode="y") == ["strategy", "max_tokens", "mode"]
