"""The lease on the wire: a lock token and a time to live as every body that carries them
declares them, and the bodies of the lease routes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.jsonsafe import StoredStr, json_number
from app.core.limits import LEASE_OWNER_MAX, LEASE_TTL_MAX_S, LOCK_TOKEN_MAX

# The live lease's token, sent with each write (SPEC §6). Optional on writes: a session
# without a live lease takes none.
LockToken = Annotated[StoredStr, Field(max_length=LOCK_TOKEN_MAX)]
# How long a claimed or renewed lease lives, in seconds.
LeaseTtl = Annotated[float, Field(gt=0, le=LEASE_TTL_MAX_S)]


class LockTokenIn(BaseModel):
    """The body of a write that takes nothing but the lease's token."""

    model_config = ConfigDict(extra="forbid")

    lock_token: LockToken | None = None


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
