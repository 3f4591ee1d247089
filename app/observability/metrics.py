"""Prometheus metrics. Defined once at import; every app in the process shares them.

Under `contextd serve --workers N` (PROMETHEUS_MULTIPROC_DIR set before the
children import this) every process writes its values to files in that folder
and `exposition()` sums them, whichever process answers the scrape. A gauge then
needs a `multiprocess_mode` saying how its per-process values combine.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess


def exposition() -> bytes:
    """The text a scrape gets: this process's metrics, or every process's under --workers."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest()


REQUEST_LATENCY = Histogram(
    "contextd_request_duration_seconds",
    "HTTP request latency by route template",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
APPEND_GROUP_SIZE = Histogram(
    "contextd_append_group_size",
    "Appends written in one transaction by group commit (app/messages/group_commit.py)",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
APPENDS_LEFT_OUT = Counter(
    "contextd_append_group_left_out_total",
    "Appends a group did not take (refused, replayed, first of a session): written alone",
)
MESSAGES_APPENDED = Counter("contextd_messages_appended_total", "Messages stored by appends")
TOKENS_APPENDED = Counter("contextd_tokens_appended_total", "Tokens of messages stored by appends")
CONTEXT_ASSEMBLED = Counter(
    "contextd_context_assembled_total", "Payloads assembled", ["strategy", "trimmed"]
)
CONTEXT_DROPPED_MESSAGES = Counter(
    "contextd_context_dropped_messages_total", "History messages left out of payloads"
)
RE_READS = Counter(
    "contextd_re_reads_total",
    "Tool calls repeating an earlier call whose result the payload no longer held whole",
)
# The bill (SPEC §4): what payload calls sent, what a provider bills at its cached rate
# (the estimate, or the provider's figure where a client reported it), and what sending
# the whole history would have cost; the summariser's tokens of stored compactions.
BILL_TOKENS = Counter(
    "contextd_bill_tokens_total",
    "Tokens of the session bill, by part",
    ["part"],
)
EVENTS_DEFERRED = Counter(
    "contextd_events_deferred_total",
    "Events written off the request path (context.compressed), by outcome",
    ["outcome"],
)
