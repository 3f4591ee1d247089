"""Prometheus metrics. Defined once at import; every app in the process shares them."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

REQUEST_LATENCY = Histogram(
    "contextd_request_duration_seconds",
    "HTTP request latency by route template",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
MESSAGES_APPENDED = Counter("contextd_messages_appended_total", "Messages stored by appends")
TOKENS_APPENDED = Counter("contextd_tokens_appended_total", "Tokens of messages stored by appends")
CONTEXT_ASSEMBLED = Counter(
    "contextd_context_assembled_total", "Payloads assembled", ["strategy", "trimmed"]
)
CONTEXT_DROPPED_MESSAGES = Counter(
    "contextd_context_dropped_messages_total", "History messages left out of payloads"
)
EVENTS_DEFERRED = Counter(
    "contextd_events_deferred_total",
    "Events written off the request path (context.compressed), by outcome",
    ["outcome"],
)
