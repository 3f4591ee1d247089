from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.api.types import StoredStr

# 1–128 characters of [A-Za-z0-9._:-], but not "." or ".." (SPEC §1): URL clients
# rewrite those path segments, so no client could reach such a session. Spelled
# without a lookahead, which the schema's regex engine lacks.
SESSION_ID_PATTERN = r"^(?:[A-Za-z0-9._:-]{3,128}|[A-Za-z0-9._:-]?[A-Za-z0-9_:-]|[A-Za-z0-9_:-]\.)$"

Anchor = Annotated[StoredStr, Field(min_length=1, max_length=2048)]


class SessionSettingsIn(BaseModel):
    """Fields left out keep their value; an explicit null resets one to its default."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    model: StoredStr | None = Field(None, min_length=1, max_length=200)
    context_limit: int | None = Field(None, gt=0, le=100_000_000)
    system_prompt: StoredStr | None = Field(None, max_length=1_000_000)
    tools: list[dict[str, Any]] | None = Field(None, max_length=512)
    strategy: StoredStr | None = Field(None, min_length=1, max_length=100)
    anchors: list[Anchor] | None = Field(None, max_length=200)
    auto_compact: bool | None = None
    compaction: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    lock_token: StoredStr | None = Field(None, max_length=200)


class LockTokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lock_token: StoredStr | None = Field(None, max_length=200)
