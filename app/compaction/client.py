"""The model client of the configured endpoint, or None (extractive summaries)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from app.compaction.llm import ChatModelClient
from app.settings import Settings

DEFAULT_SUMMARY_MODEL = "gpt-4o-mini"


@asynccontextmanager
async def model_client(settings: Settings) -> AsyncIterator[ChatModelClient | None]:
    if not settings.llm_base_url:
        yield None
        return
    async with httpx.AsyncClient() as http:
        yield ChatModelClient(
            http,
            base_url=settings.llm_base_url,
            model=settings.llm_model or DEFAULT_SUMMARY_MODEL,
            api_key=settings.llm_api_key,
        )
