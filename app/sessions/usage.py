"""`POST /sessions/{id}/usage`: the provider's reported usage calibrates the session's estimate."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.budget import effective_model
from app.core.errors import NotFound, invalid
from app.core.jsonsafe import json_number
from app.core.limits import TOKENS_MAX
from app.core.settings import Settings
from app.core.tokens import calibration, get_counter
from app.sessions import repository as sessions
from app.sessions.lease_rule import check_write
from app.sessions.schemas import LockToken


class UsageIn(BaseModel):
    """What the provider billed for one payload contextd assembled.

    `input_tokens` is every input token of the call: OpenAI's `prompt_tokens` /
    `input_tokens` (cached ones included), or Anthropic's `input_tokens`, to which
    `cache_creation_input_tokens` and `cache_read_input_tokens` are added when given
    (Anthropic reports them apart). `uncalibrated_input_tokens` is the
    `usage.uncalibrated_input_tokens` of the context response that was sent.
    """

    model_config = ConfigDict(extra="forbid")

    input_tokens: int = Field(ge=0, le=TOKENS_MAX)
    cache_creation_input_tokens: int = Field(0, ge=0, le=TOKENS_MAX)
    cache_read_input_tokens: int = Field(0, ge=0, le=TOKENS_MAX)
    uncalibrated_input_tokens: int = Field(ge=1, le=TOKENS_MAX)
    # The bill (SPEC §4): the provider's own cached figure replaces the call's estimate.
    cached_input_tokens: int | None = Field(
        None,
        ge=0,
        le=TOKENS_MAX,
        description="OpenAI's usage.prompt_tokens_details.cached_tokens (Anthropic's is "
        "cache_read_input_tokens)",
    )
    estimated_cached_input_tokens: int | None = Field(
        None,
        ge=0,
        le=TOKENS_MAX,
        description="the usage.cached_input_tokens of the context response that was sent: "
        "with the provider's cached figure, the session's bill takes the provider's",
    )
    lock_token: LockToken | None = None

    _numbers = field_validator(
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "uncalibrated_input_tokens",
        "cached_input_tokens",
        "estimated_cached_input_tokens",
        mode="before",
    )(json_number)

    @property
    def actual(self) -> int:
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


async def report(
    db: AsyncSession, tenant: str, sid: str, body: UsageIn, settings: Settings
) -> dict[str, Any]:
    if body.actual < 1:
        raise invalid("input_tokens", "with the cache tokens, must count at least 1 token")
    locked = await sessions.get_for_update(db, tenant, sid)
    if locked is None:
        raise NotFound(f"session {sid!r} does not exist")
    row, lease_live = locked
    check_write(row, lease_live, body.lock_token)
    applied = get_counter(effective_model(row, settings)).mode == "estimate"
    state = calibration.Calibration.from_json(row.token_calibration)
    state = calibration.update(
        state, actual=body.actual, uncalibrated=body.uncalibrated_input_tokens, applied=applied
    )
    row.token_calibration = state.to_json()
    billed = _provider_cached(body)
    if billed is not None and body.estimated_cached_input_tokens is not None:
        row.bill_cached_input_tokens += billed - body.estimated_cached_input_tokens
        row.bill_reported_calls += 1
    await db.flush()
    return {
        "calibration": state.view(applied),
        "bill_replaced": billed is not None and body.estimated_cached_input_tokens is not None,
    }


def _provider_cached(body: UsageIn) -> int | None:
    """The provider's cached figure, if the report carries one."""
    if body.cached_input_tokens is not None:
        return body.cached_input_tokens
    if "cache_read_input_tokens" in body.model_fields_set:
        return body.cache_read_input_tokens
    return None
