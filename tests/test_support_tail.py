"""The outside check of the preserved tail that the fault tests and the load bench use."""

from __future__ import annotations

from typing import Any

from tests.support.tail import step_starts, tail_violation


def log_of(roles: str) -> list[dict[str, Any]]:
    """u = user, t = assistant text, c = assistant with a tool call, r = its result."""
    out: list[dict[str, Any]] = []
    for i, r in enumerate(roles, start=1):
        m: dict[str, Any] = {
            "seq": i,
            "role": {"u": "user", "t": "assistant", "c": "assistant", "r": "tool"}[r],
        }
        if r == "c":
            m["tool_calls"] = [{"id": f"c{i}"}]
        out.append(m)
    return out


def test_steps_join_text_to_the_call_after_it() -> None:
    #             1  2 3 4 5 6 7 8 9
    log = log_of("utcrcrttc")
    assert step_starts(log[1:]) == [2, 5, 7, 8]


def test_the_watermark_may_enter_the_turn_but_not_its_last_steps() -> None:
    log = log_of("u" + "cr" * 6)  # user at 1, steps start at 2, 4, 6, 8, 10, 12
    assert tail_violation(log, 0) is None
    assert tail_violation(log, 5) is None  # inside the turn, four steps left
    assert tail_violation(log, 6) is not None
    assert "last 4 steps" in (tail_violation(log, 7) or "")
    assert tail_violation(log, 3, min_preserved_steps=6) is not None


def test_a_turn_with_no_step_cannot_be_covered() -> None:
    log = log_of("utcru")
    assert tail_violation(log, 4) is None
    assert tail_violation(log, 5) is not None
