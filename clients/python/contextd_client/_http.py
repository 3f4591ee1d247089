"""What both clients give their `httpx` client: base URL, headers, per-call timeouts."""

from __future__ import annotations

import os
from collections.abc import Mapping

import httpx

__all__ = ["DEFAULT_URL", "base_url", "headers", "timeout_for"]

DEFAULT_URL = "http://127.0.0.1:8080"


def base_url(given: str | None) -> str:
    return given or os.environ.get("CONTEXTD_URL") or DEFAULT_URL


def headers(api_key: str | None, given: Mapping[str, str] | None) -> httpx.Headers:
    """The default headers. Names are case-insensitive, so a caller's `Accept` replaces
    ours; an `Authorization` in `given` wins over `api_key` and `$CONTEXTD_API_KEY`
    (it is the more specific of the two: a gateway's scheme, a token per client)."""
    out = httpx.Headers({"accept": "application/json"})
    out.update(given or {})
    key = api_key if api_key is not None else os.environ.get("CONTEXTD_API_KEY")
    if key and "authorization" not in out:
        out["authorization"] = f"Bearer {key}"
    return out


def timeout_for(client: httpx.Timeout, read_at_least: float | None) -> httpx.Timeout:
    """The client's timeout, its read stretched for an answer the server holds back on
    purpose (a waiting compact): a shorter read would give up on an answer on its way."""
    if read_at_least is None or client.read is None or client.read >= read_at_least:
        return client
    return httpx.Timeout(
        connect=client.connect, read=read_at_least, write=client.write, pool=client.pool
    )
