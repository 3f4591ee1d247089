"""The providers' caching rules of the bill (app/core/bill.py), on hand-made cases."""

from __future__ import annotations

import pytest

from app.core import bill


@pytest.mark.parametrize(
    ("shared", "cached"),
    [
        (0, 0),
        (1023, 0),  # below OpenAI's minimum nothing is cached
        (1024, 1024),
        (1151, 1024),  # 127 tokens past it: not a whole step
        (1152, 1152),
        (1279, 1152),
        (1280, 1280),
        (10_000, 1024 + (10_000 - 1024) // 128 * 128),
    ],
)
def test_openai_caches_from_1024_tokens_in_128_token_steps(shared: int, cached: int) -> None:
    assert bill.openai_cached(shared) == cached
    assert bill.cached_tokens("openai", shared, 1.0, "gpt-4o") == cached
    # OpenAI's cache has no fixed lifetime here: an hour later the rule is the same.
    assert bill.cached_tokens("openai", shared, 3600.0, "gpt-4o") == cached


def test_the_first_call_of_a_session_has_nothing_cached() -> None:
    assert bill.cached_tokens("openai", 5000, None, "gpt-4o") == 0
    assert bill.cached_tokens("anthropic", 5000, None, "claude-sonnet-4-5") == 0


@pytest.mark.parametrize(
    ("shared", "since", "model", "cached"),
    [
        (5000, None, "claude-sonnet-4-5", 0),  # no previous call: nothing was written
        (5000, 10.0, "claude-sonnet-4-5", 5000),  # the whole prefix to the breakpoint
        (5000, 300.0, "claude-sonnet-4-5", 5000),  # five minutes: still alive
        (5000, 300.5, "claude-sonnet-4-5", 0),  # past five minutes: expired
        (1023, 1.0, "claude-sonnet-4-5", 0),  # under the minimum cacheable length
        (1024, 1.0, "claude-sonnet-4-5", 1024),  # no 128-token steps on Anthropic
        (1500, 1.0, "claude-3-5-haiku", 0),  # Haiku's minimum is 2,048
        (2048, 1.0, "claude-3-5-haiku", 2048),
    ],
)
def test_anthropic_caches_the_prefix_for_five_minutes(
    shared: int, since: float | None, model: str, cached: int
) -> None:
    assert bill.anthropic_cached(shared, since, model) == cached
    assert bill.cached_tokens("anthropic", shared, since, model) == cached


def test_the_provider_follows_the_format_then_the_model() -> None:
    assert bill.provider_of("anthropic", "gpt-4o") == "anthropic"
    assert bill.provider_of("openai", "claude-sonnet-4-5") == "anthropic"
    assert bill.provider_of("openai", "gpt-4o") == "openai"
    assert bill.provider_of("responses", None) == "openai"


def test_the_saving_is_the_whole_history_less_what_was_billed() -> None:
    out = bill.session_bill(
        calls=2,
        input_tokens=3000,
        cached_input_tokens=2000,
        full_history_input_tokens=10_000,
        summariser_input_tokens=500,
        summariser_output_tokens=100,
        reported_calls=0,
    )
    # 1000 uncached + 0.1 * 2000 cached + 600 of the summariser's.
    assert out["billed_input_equivalent"] == 1800
    assert out["saved_tokens"] == 8200
    assert out["saving_ratio"] == 0.82
