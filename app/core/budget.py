"""Budget arithmetic of SPEC §4, pure: thresholds and status from token totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import ValidationError

from app.core.settings import CompactionSettings, Settings, check_compaction
from app.core.tokens import REPLY_PRIMING, calibration, get_counter, known_context_limit

Status = Literal["ok", "warn", "compact_needed"]


@dataclass(frozen=True, slots=True)
class Budget:
    status: Status
    current_tokens: int
    usable_budget: int
    warn_threshold: int
    compact_threshold: int
    context_limit: int
    tokenizer_mode: str

    def as_dict(self) -> dict[str, Any]:
        # Spelled out: dataclasses.asdict deep-copies every value (~20 us per budget).
        return {
            "status": self.status,
            "current_tokens": self.current_tokens,
            "usable_budget": self.usable_budget,
            "warn_threshold": self.warn_threshold,
            "compact_threshold": self.compact_threshold,
            "context_limit": self.context_limit,
            "tokenizer_mode": self.tokenizer_mode,
        }


# base's id -> (base, {(limit, overrides): settings}). The entry holds `base` itself,
# so its id cannot be reused by another object while the entry exists.
_EFFECTIVE: dict[int, tuple[CompactionSettings, dict[Any, CompactionSettings]]] = {}


def effective_compaction(
    base: CompactionSettings, overrides: dict[str, Any], context_limit: int
) -> CompactionSettings:
    """The session's settings: the service's, its overrides, and its resolved context limit.

    Every append's budget asks; the combinations in use are few, and the answer is
    only read, so it is built once per combination (model_dump and model_construct
    were ~30 us a time)."""
    try:
        key: Any = (context_limit, tuple(sorted(overrides.items())))
        hash(key)
    except TypeError:  # an unhashable override value: build it every time
        return _effective(base, overrides, context_limit)
    entry = _EFFECTIVE.get(id(base))
    if entry is None or entry[0] is not base:
        if len(_EFFECTIVE) >= 64:
            _EFFECTIVE.clear()
        entry = _EFFECTIVE[id(base)] = (base, {})
    known = entry[1]
    found = known.get(key)
    if found is None:
        if len(known) >= 1024:
            known.clear()
        found = known[key] = _effective(base, overrides, context_limit)
    return found


def _effective(
    base: CompactionSettings, overrides: dict[str, Any], context_limit: int
) -> CompactionSettings:
    merged = base.model_dump()
    merged.update(overrides)
    merged["context_limit"] = context_limit
    # Validated again (once per combination, see above): overrides stored before they were
    # checked strictly may hold strings ("3", "false"), which broke every compaction of
    # the session. An override that does not validate any more is left out, not obeyed.
    try:
        return CompactionSettings.model_validate(merged)
    except ValidationError:
        return CompactionSettings.model_construct(
            **{**base.model_dump(), "context_limit": context_limit}
        )


def resolve_context_limit(
    session_limit: int | None,
    override_limit: int | None,
    model_limit: int | None,
    base: CompactionSettings,
) -> int:
    """Session setting, then session override, then an operator's explicit
    COMPACTION_CONTEXT_LIMIT, then the model's known length, then the default;
    never more than the model's known length."""
    if session_limit is not None:
        limit = session_limit
    elif override_limit is not None:
        limit = override_limit
    elif "context_limit" in base.model_fields_set or model_limit is None:
        limit = base.context_limit
    else:
        limit = model_limit
    return min(limit, model_limit) if model_limit is not None else limit


def compute(current_tokens: int, c: CompactionSettings, tokenizer_mode: str) -> Budget:
    usable = c.usable_budget
    warn = int(usable * c.warn_ratio)
    compact = int(usable * c.compact_ratio)
    status: Status = "ok"
    if current_tokens >= compact:
        status = "compact_needed"
    elif current_tokens >= warn:
        status = "warn"
    return Budget(status, current_tokens, usable, warn, compact, c.context_limit, tokenizer_mode)


def override_problems(c: CompactionSettings) -> list[str]:
    return check_compaction(c, session=True)


class Budgeted(Protocol):
    """The columns a session's budget is computed from (the ORM row, or the append
    path's SessionHead read straight off its statement)."""

    @property
    def model(self) -> str | None: ...
    @property
    def context_limit(self) -> int | None: ...
    @property
    def compaction(self) -> dict[str, Any]: ...
    @property
    def token_calibration(self) -> dict[str, Any]: ...
    @property
    def system_tokens(self) -> int: ...
    @property
    def tools_tokens(self) -> int: ...
    @property
    def summary_tokens(self) -> int: ...
    @property
    def context_tokens(self) -> int: ...
    @property
    def watermark_context_tokens(self) -> int: ...


def effective_model(row: Budgeted, settings: Settings) -> str:
    return row.model or settings.default_model


def session_compaction(row: Budgeted, settings: Settings) -> CompactionSettings:
    model = effective_model(row, settings)
    limit = resolve_context_limit(
        row.context_limit,
        row.compaction.get("context_limit"),
        known_context_limit(model),
        settings.compaction,
    )
    return effective_compaction(settings.compaction, row.compaction, limit)


def budget_of(row: Budgeted, settings: Settings, extra_tokens: int = 0) -> Budget:
    """What the session would send now: system + tools + summary + effective history."""
    counted = (
        row.system_tokens
        + row.tools_tokens
        + row.summary_tokens
        + (row.context_tokens - row.watermark_context_tokens)
        + extra_tokens
    )
    current, mode = as_budgeted(row, settings, counted)
    return compute(current, session_compaction(row, settings), mode)


def as_budgeted(row: Budgeted, settings: Settings, counted: int) -> tuple[int, str]:
    """`counted` tokens of the session's messages as its budget counts them (the reply's
    priming added, an estimate scaled by the session's calibration: app/core/tokens/calibration.py),
    and the tokenizer mode. The console's chart counts its past points the same way."""
    counter = get_counter(effective_model(row, settings))
    factor = calibration.factor_of(row.token_calibration, counter.mode)
    return calibration.calibrated(counted + REPLY_PRIMING, factor), counter.mode
