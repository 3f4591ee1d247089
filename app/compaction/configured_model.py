"""The model client of the configured endpoint, or None (extractive summaries)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from app.compaction.model_client import ChatModelClient
from app.compaction.summary import SECTIONS
from app.core.settings import Settings

DEFAULT_SUMMARY_MODEL = "gpt-4o-mini"


def summary_json_schema() -> dict[str, Any]:
    """The summary's shape for `response_format: json_schema` (strict: every key required)."""
    return {
        "type": "object",
        "properties": {name: {"type": "array", "items": {"type": "string"}} for name in SECTIONS},
        "required": list(SECTIONS),
        "additionalProperties": False,
    }


@asynccontextmanager
async def model_client(settings: Settings) -> AsyncIterator[ChatModelClient | None]:
    if not settings.llm_base_url:
        yield None
        return
    async with ChatModelClient(
        base_url=settings.llm_base_url,
        model=settings.llm_model or DEFAULT_SUMMARY_MODEL,
        api_key=settings.llm_api_key,
        max_retries=settings.llm_max_retries,
        reasoning=settings.llm_reasoning,
        json_mode=settings.llm_json_mode,
        json_schema=summary_json_schema(),
        schema_name="conversation_summary",
    ) as client:
        yield client
