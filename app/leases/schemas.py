"""The lease routes' bodies, and a lease's time to live (the lock token every write
carries is the session's: app/sessions/schemas.py)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.jsonsafe import StoredStr, json_number
from app.core.limits import LEASE_OWNER_MAX, LEASE_TTL_MAX_S
from app.sessions.schemas import LockToken

# How long a claimed or renewed lease lives, in seconds.
LeaseTtl = Annotated[float, Field(gt=0, le=LEASE_TTL_MAX_S)]


class ClaimIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    owner: StoredStr = Field(min_length=1, max_length=LEASE_OWNER_MAX)
    ttl_s: LeaseTtl = 30.0
    _numbers = field_validator("ttl_s", mode="before")(json_number)


class RenewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lock_token: LockToken = Field(min_length=1)
    ttl_s: LeaseTtl = 30.0
    _numbers = field_validator("ttl_s", mode="before")(json_number)


class ReleaseIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lock_token: LockToken = Field(min_length=1)
