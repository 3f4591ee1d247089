"""Calibrating a session's token estimate from the provider's reported usage (pure).

Models without a local tokenizer (Claude, Gemini, …) are counted by the
estimate of `app.core.tokens.counter`, which is fitted to o200k_base and can be off
by 10–30% for another provider's tokenizer and a session's mix of languages and
code. When a client reports what the provider actually billed for a payload
(`POST /sessions/{id}/usage`), the ratio `provider / uncalibrated estimate`
updates a per-session factor:

- smoothed: the running mean of the ratios for the first `1 / MIN_WEIGHT`
  reports, then an exponential moving average with weight `MIN_WEIGHT`, so one
  odd report moves the factor little while the first few converge fast;
- bounded to [FACTOR_MIN, FACTOR_MAX]: a report for the wrong payload cannot
  make the session's budget absurd;
- with hysteresis: the factor in force (`factor`) follows the learnt one
  (`learnt`) only when they differ by more than `TOLERANCE`. The factor scales
  the budget the payload is fitted to, and a new budget starts a new stable
  payload stream (a re-trim, a prompt-cache miss), so it must not move on
  every report.

The factor applies only to estimate-mode sessions: an exact tokenizer's count
is what it is, so reports on such sessions are recorded (the error is shown)
but change nothing. Applying it: the assembly runs on uncalibrated counts
against `raw_budget(budget, factor)`, and the counts shown are `calibrated()`,
so `calibrated(input) <= budget` exactly when `input <= raw_budget(budget)`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Final

FACTOR_MIN: Final = 0.5
FACTOR_MAX: Final = 2.0
MIN_WEIGHT: Final = 0.2
TOLERANCE: Final = 0.03


def _clamp(value: float) -> float:
    return min(FACTOR_MAX, max(FACTOR_MIN, value))


def _error(estimate: float, actual: int) -> float:
    """Relative error of an estimate, signed: +0.10 means 10% too high."""
    return round((estimate - actual) / actual, 4)


@dataclass(frozen=True, slots=True)
class Calibration:
    """A session's calibration state, stored as JSON on the session row."""

    factor: float = 1.0
    learnt: float = 1.0
    samples: int = 0
    # Sums of |relative error| over every report, for the means shown in stats:
    # of the uncalibrated estimate, and of the calibrated estimate that was in
    # force when the report came (the error a client actually saw).
    abs_error_uncalibrated: float = 0.0
    abs_error_calibrated: float = 0.0
    last: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Calibration:
        if not data:
            return cls()
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def view(self, applied: bool) -> dict[str, Any]:
        """What GET /sessions/{id} and POST /usage show."""
        n = self.samples
        return {
            "factor": self.factor if applied else 1.0,
            "learnt_factor": self.learnt if applied else 1.0,
            "applied": applied,
            "samples": n,
            "mean_abs_error_uncalibrated": round(self.abs_error_uncalibrated / n, 4) if n else None,
            "mean_abs_error_calibrated": round(self.abs_error_calibrated / n, 4) if n else None,
            "last": self.last,
        }


def update(state: Calibration, *, actual: int, uncalibrated: int, applied: bool) -> Calibration:
    """The state after one report: the provider counted `actual` input tokens for a
    payload contextd estimated at `uncalibrated` tokens (before any factor)."""
    before = state.factor if applied else 1.0
    factor, learnt = before, state.learnt
    if applied:
        ratio = _clamp(actual / uncalibrated)
        weight = max(1.0 / (state.samples + 1), MIN_WEIGHT)
        learnt = _clamp(round(learnt + weight * (ratio - learnt), 4))
        if abs(learnt / before - 1) > TOLERANCE:
            factor = learnt
    last = {
        "provider_input_tokens": actual,
        "uncalibrated_input_tokens": uncalibrated,
        "error_uncalibrated": _error(uncalibrated, actual),
        "error_before": _error(uncalibrated * before, actual),
        "error_after": _error(uncalibrated * factor, actual),
        "factor_before": before,
        "factor_after": factor,
    }
    return replace(
        state,
        factor=factor,
        learnt=learnt,
        samples=state.samples + 1,
        abs_error_uncalibrated=state.abs_error_uncalibrated + abs(last["error_uncalibrated"]),
        abs_error_calibrated=state.abs_error_calibrated + abs(last["error_before"]),
        last=last,
    )


def factor_of(data: dict[str, Any] | None, mode: str) -> float:
    """The factor to apply for a session (1.0 unless its counts are estimates)."""
    if mode != "estimate" or not data:
        return 1.0
    return _clamp(float(data.get("factor", 1.0)))


def calibrated(tokens: int, factor: float) -> int:
    return tokens if factor == 1.0 else math.ceil(tokens * factor)


def raw_budget(budget: int, reserve: int, factor: float) -> tuple[int, int]:
    """The uncalibrated `(budget, reserve)` whose input limit, calibrated, stays
    within `budget - reserve`."""
    if factor == 1.0:
        return budget, reserve
    return max(1, math.floor(budget / factor)), math.ceil(reserve / factor)


def calibrate_usage(usage: dict[str, Any], factor: float, budget: int) -> None:
    """Rewrites a context `usage` in place: calibrated counts (the breakdown still adds
    up), the real `budget`, and the uncalibrated total a client reports back."""
    raw = int(usage["input_tokens"])
    usage["uncalibrated_input_tokens"] = raw
    usage["calibration_factor"] = factor
    if factor == 1.0:
        return
    total = calibrated(raw, factor)
    parts = {k: math.floor(v * factor) for k, v in usage["breakdown"].items()}
    parts["history"] += total - sum(parts.values())
    usage.update(input_tokens=total, budget=budget, breakdown=parts)
    if isinstance(usage.get("recent_tokens"), int):
        usage["recent_tokens"] = math.floor(usage["recent_tokens"] * factor)
    if isinstance(usage.get("stable_prefix_tokens"), int):
        usage["stable_prefix_tokens"] = math.floor(usage["stable_prefix_tokens"] * factor)
