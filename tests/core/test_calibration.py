"""The estimate's calibration from reported provider usage (app/core/tokens/calibration.py)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.core.tokens import calibration
from app.core.tokens.calibration import Calibration


def test_first_reports_converge_then_one_outlier_moves_little() -> None:
    state = Calibration()
    for _ in range(3):
        state = calibration.update(state, actual=1200, uncalibrated=1000, applied=True)
    assert state.factor == 1.2 and state.samples == 3
    assert state.last is not None and state.last["error_after"] == 0.0
    # The first report: the raw estimate was 1/1.2 of the truth.
    first = calibration.update(Calibration(), actual=1200, uncalibrated=1000, applied=True)
    assert first.last is not None
    assert (
        first.last["error_before"] == round(1000 / 1200 - 1, 4) and first.last["error_after"] == 0.0
    )
    for _ in range(5):
        state = calibration.update(state, actual=1200, uncalibrated=1000, applied=True)
    odd = calibration.update(state, actual=3000, uncalibrated=1000, applied=True)
    assert 1.2 < odd.learnt <= 1.2 + calibration.MIN_WEIGHT * (2.0 - 1.2) + 1e-9


def test_factor_is_bounded() -> None:
    state = calibration.update(Calibration(), actual=100_000, uncalibrated=10, applied=True)
    assert state.factor == calibration.FACTOR_MAX
    state = calibration.update(Calibration(), actual=1, uncalibrated=10_000, applied=True)
    assert state.factor == calibration.FACTOR_MIN


def test_small_drift_keeps_the_factor_in_force() -> None:
    """The factor scales the budget; it only moves past TOLERANCE, so payloads stay stable."""
    state = Calibration()
    for _ in range(6):
        state = calibration.update(state, actual=1100, uncalibrated=1000, applied=True)
    assert state.factor == 1.1
    drifted = calibration.update(state, actual=1150, uncalibrated=1000, applied=True)
    assert drifted.factor == 1.1 and drifted.learnt > 1.1


def test_exact_sessions_record_but_never_apply() -> None:
    state = calibration.update(Calibration(), actual=1050, uncalibrated=1000, applied=False)
    assert state.factor == 1.0 and state.samples == 1
    assert state.view(applied=False)["mean_abs_error_calibrated"] == round(50 / 1050, 4)
    assert calibration.factor_of({"factor": 1.5}, "exact") == 1.0
    assert calibration.factor_of({"factor": 1.5}, "estimate") == 1.5
    assert calibration.factor_of({}, "estimate") == 1.0


def test_state_round_trips_through_json() -> None:
    state = calibration.update(Calibration(), actual=900, uncalibrated=1000, applied=True)
    assert Calibration.from_json(state.to_json()) == state
    assert Calibration.from_json(None) == Calibration()


@given(
    budget=st.integers(1, 1_000_000),
    reserve=st.integers(0, 1_000),
    factor=st.floats(calibration.FACTOR_MIN, calibration.FACTOR_MAX),
    parts=st.lists(st.integers(0, 50_000), min_size=5, max_size=5),
)
def test_a_payload_within_the_raw_budget_is_within_the_real_one(
    budget: int, reserve: int, factor: float, parts: list[int]
) -> None:
    raw_budget, raw_reserve = calibration.raw_budget(budget + reserve, reserve, factor)
    raw_limit = raw_budget - raw_reserve
    names = ("system", "tools", "dynamic", "summary", "history")
    usage: dict[str, Any] = {
        "input_tokens": sum(parts),
        "budget": raw_limit,
        "breakdown": dict(zip(names, parts, strict=True)),
    }
    calibration.calibrate_usage(usage, factor, budget)
    assert usage["uncalibrated_input_tokens"] == sum(parts)
    assert usage["input_tokens"] == sum(usage["breakdown"].values())
    if factor != 1.0:
        assert usage["input_tokens"] == math.ceil(sum(parts) * factor)
        assert usage["budget"] == budget
    if sum(parts) <= raw_limit:
        assert usage["input_tokens"] <= budget
