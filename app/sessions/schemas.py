from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from app.core.jsonsafe import StoredStr, json_number
from app.core.limits import (
    ANCHOR_MAX,
    ANCHORS_MAX,
    LOCK_TOKEN_MAX,
    MODEL_NAME_MAX,
    STRATEGY_NAME_MAX,
    SYSTEM_PROMPT_MAX,
    TOKENS_MAX,
    TOOLS_MAX,
)

# The live lease's token, sent with each write (SPEC §6). Optional on writes: a session
# without a live lease takes none.
LockToken = Annotated[StoredStr, Field(max_length=LOCK_TOKEN_MAX)]


class LockTokenIn(BaseModel):
    """The body of a write that takes nothing but the lease's token."""

    model_config = ConfigDict(extra="forbid")

    lock_token: LockToken | None = None


Anchor = Annotated[StoredStr, Field(min_length=1, max_length=ANCHOR_MAX)]


class SessionSettingsIn(BaseModel):
    """Fields left out keep their value; an explicit null resets one to its default."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: StoredStr | None = Field(None, min_length=1, max_length=MODEL_NAME_MAX)
    context_limit: int | None = Field(None, gt=0, le=TOKENS_MAX)
    system_prompt: StoredStr | None = Field(None, max_length=SYSTEM_PROMPT_MAX)
    tools: list[dict[str, Any]] | None = Field(None, max_length=TOOLS_MAX)
    strategy: StoredStr | None = Field(None, min_length=1, max_length=STRATEGY_NAME_MAX)
    anchors: list[Anchor] | None = Field(None, max_length=ANCHORS_MAX)
    auto_compact: StrictBool | None = None
    # Payloads offer the recall tool and a note on what they leave out (SPEC §3 Recall).
    recall: StrictBool | None = None
    compaction: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    lock_token: LockToken | None = None

    _numbers = field_validator("context_limit", mode="before")(json_number)
