"""The bill and the re-reads in the API's answers (SPEC §3, §4; app/core/bill.py,
app/context/rereads.py): the fields `usage` and `stats` gain, for the OpenAPI
description."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_RE_READS = (
    "tool calls so far whose name and arguments repeat an earlier call whose result the "
    "payload no longer held whole: at or below the watermark (folded into the summary), "
    "left out or masked by the stream's last trim (its stored layout, when it still holds "
    "for the session's watermark), or over the tool-output preview limit; counted by the "
    "append that makes the call, once (a replayed append counts nothing)"
)


class UsageBill(BaseModel):
    """The call's part of the bill (`usage`)."""

    model_config = ConfigDict(extra="allow")

    cached_input_tokens: int = Field(
        0,
        description="of input_tokens, what the provider bills at its cached rate: "
        "stable_prefix_tokens under its caching rules (OpenAI: none below 1,024 tokens, "
        "then whole 128-token steps; Anthropic: the prefix up to the stable prefix's "
        "cache breakpoint, if the stream's previous call was at most five minutes ago and "
        "it reaches the model's minimum of 1,024 tokens, 2,048 for Haiku)",
    )
    cache_provider: Literal["openai", "anthropic"] = Field(
        "openai",
        description="whose rules: anthropic for format=anthropic or a claude* model, else openai",
    )
    full_history_input_tokens: int = Field(
        0,
        description="what sending the whole history would have cost: the same system "
        "block, tools and dynamic context, and every in-context message of the log, "
        "compacted ones included",
    )
    summariser_input_tokens: int = Field(
        0,
        description="the summariser's input tokens of compactions stored since the "
        "session's previous payload call",
    )
    summariser_output_tokens: int = Field(0, description="the summariser's output tokens, likewise")
    re_reads: int = Field(0, description="the session's re-reads so far: " + _RE_READS)


class SessionBill(BaseModel):
    """`stats.bill`: the sums of the payload calls' figures, and the saving."""

    model_config = ConfigDict(extra="allow")

    calls: int = Field(description="payload calls billed (observe calls are not)")
    input_tokens: int
    cached_input_tokens: int = Field(
        description="the calls' estimates, each replaced by the provider's own figure "
        "where a client reported it (POST /sessions/{id}/usage with "
        "estimated_cached_input_tokens)"
    )
    summariser_input_tokens: int = Field(description="of every stored compaction")
    summariser_output_tokens: int
    full_history_input_tokens: int
    reported_calls: int = Field(description="calls whose cached figure is the provider's")
    billed_input_equivalent: float = Field(
        description="input tokens at the full price that the bill amounts to: uncached "
        "input, cached input at 0.1, the summariser's input and output at 1"
    )
    saved_tokens: float = Field(
        description="full_history_input_tokens minus billed_input_equivalent"
    )
    saving_ratio: float = Field(description="saved_tokens / full_history_input_tokens")


RE_READS_DESCRIPTION = _RE_READS
