"""The bill of a payload call (SPEC §4 "The bill"): pure arithmetic on its `usage`.

`cached_input_tokens` is what a provider would bill at its cached rate, from
`usage.stable_prefix_tokens` (the leading tokens identical to the previous payload of
the stream) under that provider's documented prompt-caching rules:

- **OpenAI** (Chat Completions and Responses): nothing is cached below 1,024 tokens of
  shared prefix; from there the cached part grows in steps of 128 tokens, so the
  figure is 1,024 plus the whole 128-token steps of the rest.
- **Anthropic** (Messages): `format=anthropic` puts a `cache_control` breakpoint at the
  end of the stable prefix (app/context/formats/anthropic.py); what precedes it is
  read from the cache when the previous call of the stream wrote it no more than five
  minutes ago (the default cache lifetime, renewed by each read) and it is at least
  the model's minimum cacheable length (1,024 tokens; 2,048 for Haiku models).

The first payload call of a session has nothing cached under either rule: no
earlier call of it wrote anything to the provider's cache.

Which provider: `format=anthropic`, or a session model whose name starts with
`claude` (an Anthropic model behind an OpenAI-compatible gateway caches by
Anthropic's rules), is Anthropic; every other call is billed by OpenAI's rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Provider = Literal["openai", "anthropic"]

OPENAI_MIN_CACHED = 1024
OPENAI_STEP = 128
ANTHROPIC_TTL_S = 300.0
ANTHROPIC_MIN_CACHED = 1024
ANTHROPIC_HAIKU_MIN_CACHED = 2048


def provider_of(fmt: str, model: str | None) -> Provider:
    if fmt == "anthropic" or (model or "").lower().startswith("claude"):
        return "anthropic"
    return "openai"


def openai_cached(shared: int) -> int:
    if shared < OPENAI_MIN_CACHED:
        return 0
    return OPENAI_MIN_CACHED + (shared - OPENAI_MIN_CACHED) // OPENAI_STEP * OPENAI_STEP


def anthropic_cached(shared: int, since_previous_s: float | None, model: str | None) -> int:
    """`shared` tokens read from the cache, if the previous call of the stream (made
    `since_previous_s` seconds ago; None: none known) was within the cache's lifetime."""
    if since_previous_s is None or not 0 <= since_previous_s <= ANTHROPIC_TTL_S:
        return 0
    floor = ANTHROPIC_HAIKU_MIN_CACHED if "haiku" in (model or "").lower() else ANTHROPIC_MIN_CACHED
    return shared if shared >= floor else 0


def cached_tokens(
    provider: Provider, shared: int, since_previous_s: float | None, model: str | None
) -> int:
    """What `provider` bills at its cached rate. The first payload call of a session
    (`since_previous_s` None) is billed nothing cached, whatever `shared` says: without a
    `previous_prefix_id` a payload assumes a previous call with its own head."""
    if since_previous_s is None:
        return 0
    if provider == "anthropic":
        return anthropic_cached(shared, since_previous_s, model)
    return openai_cached(shared)


@dataclass(frozen=True, slots=True)
class CallBill:
    """One payload call's part of the bill, as `usage` reports it."""

    provider: Provider
    input_tokens: int
    cached_input_tokens: int
    full_history_input_tokens: int
    summariser_input_tokens: int
    summariser_output_tokens: int

    def usage_fields(self) -> dict[str, int | str]:
        return {
            "cached_input_tokens": self.cached_input_tokens,
            "full_history_input_tokens": self.full_history_input_tokens,
            "summariser_input_tokens": self.summariser_input_tokens,
            "summariser_output_tokens": self.summariser_output_tokens,
            "cache_provider": self.provider,
        }


def session_bill(
    *,
    calls: int,
    input_tokens: int,
    cached_input_tokens: int,
    full_history_input_tokens: int,
    summariser_input_tokens: int,
    summariser_output_tokens: int,
    reported_calls: int,
    cached_price: float = 0.1,
) -> dict[str, int | float]:
    """`stats.bill`: the sums, and the saving against sending the whole history
    uncached (in input-token equivalents, cached tokens at `cached_price`; the
    summariser's input and output counted at the input price)."""
    billed = (
        input_tokens
        - cached_input_tokens
        + cached_price * cached_input_tokens
        + summariser_input_tokens
        + summariser_output_tokens
    )
    saved = full_history_input_tokens - billed
    return {
        "calls": calls,
        "input_tokens": input_tokens,
        "cached_input_tokens": cached_input_tokens,
        "summariser_input_tokens": summariser_input_tokens,
        "summariser_output_tokens": summariser_output_tokens,
        "full_history_input_tokens": full_history_input_tokens,
        "reported_calls": reported_calls,
        "billed_input_equivalent": round(billed, 1),
        "saved_tokens": round(saved, 1),
        "saving_ratio": round(saved / full_history_input_tokens, 4)
        if full_history_input_tokens
        else 0.0,
    }
