"""The search answer, for the OpenAPI description (handlers return plain dicts)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

_OPEN = ConfigDict(extra="allow")


class SearchHit(BaseModel):
    model_config = _OPEN

    seq: int
    role: str
    tool_name: str | None = Field(
        description="a tool message's tool; the function an assistant message calls first"
    )
    snippet: str = Field(description="about 160 characters around the match")
    line: int | None = Field(
        description="the content line of the match (for `line_start`), if in the content"
    )
    path: str = Field(description="`/sessions/{id}/messages/{seq}`: the message in full")
    score: float = Field(description="the summed weights of the query terms it matches")
    compacted: bool = Field(description="at or below the compaction watermark")


class SearchOut(BaseModel):
    model_config = _OPEN

    query: str
    hits: list[SearchHit] = Field(description="best first; newest first among equals")
    last_seq: int
    last_compaction_seq: int
