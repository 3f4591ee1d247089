"""Compaction metrics: lag, duration, model tokens spent, tokens freed, jobs by outcome,
and the queue (read from the database when /metrics is scraped)."""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge, Histogram

COMPACTION_JOBS = Counter("contextd_compaction_jobs_total", "Finished compaction jobs", ["status"])
COMPACTION_DURATION = Histogram(
    "contextd_compaction_duration_seconds",
    "Time a runner spent on one job, model calls included",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
COMPACTION_LAG = Histogram(
    "contextd_compaction_lag_seconds",
    "From the request of a job to its stored summary",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
MODEL_TOKENS = Counter(
    "contextd_compaction_model_tokens_total", "Prompt and completion tokens spent on summaries"
)
TOKENS_FREED = Counter(
    "contextd_compaction_tokens_freed_total", "Context tokens removed from effective histories"
)
AUTO_SKIPPED = Counter(
    "contextd_compaction_auto_skipped_total",
    "Appends at compact_needed that queued no job: the session row showed nothing to free, "
    "or the state of its last noop had not grown enough",
)
COMPACTION_REVERTS = Counter(
    "contextd_compaction_reverts_total",
    "Stored compactions undone by POST /sessions/{id}/compaction/{job_id}/revert",
)
QUEUE_JOBS = Gauge(
    "contextd_compaction_queue_jobs",
    "Compaction jobs waiting or running, across the database (all processes, all tenants)",
    ["status"],
    # Read from the database by whichever process is scraped: its value is the latest.
    multiprocess_mode="mostrecent",
)
QUEUE_OLDEST_PENDING = Gauge(
    "contextd_compaction_queue_oldest_pending_seconds",
    "Age of the oldest job no runner has claimed yet (0 when none waits)",
    multiprocess_mode="mostrecent",
)
WORKERS_LIVE = Gauge(
    "contextd_compaction_workers_live",
    "`contextd worker` processes with a fresh heartbeat; while > 0, servers in "
    "run_compactions_in_process=auto mode leave the queue to them",
    multiprocess_mode="mostrecent",
)
GATE_PROBES = Counter(
    "contextd_compaction_gate_probes_total",
    "Quality-gate probes of stored compactions by kind and outcome: kept (by the summary "
    "as written), patched (restored by the retry, the patch or the extractive fallback), "
    "dropped (missing from the stored context)",
    ["kind", "outcome"],
)


SUMMARY_ITEMS_DROPPED = Counter(
    "contextd_compaction_summary_items_dropped_total",
    "Items of the summariser's answers dropped before the summary was stored, by reason: "
    "unsupported (nothing of the log supports it: invented), echo (the instructions repeated)",
    ["reason"],
)


def count_gate(gate: dict[str, Any] | None) -> None:
    """Count one job's probes (gate.Verdict.record) in GATE_PROBES, and the answer's items
    it dropped in SUMMARY_ITEMS_DROPPED."""
    if not gate:
        return
    cites = gate.get("citations") or {}
    for reason in ("unsupported", "echo"):
        if cites.get(reason):
            SUMMARY_ITEMS_DROPPED.labels(reason).inc(cites[reason])
    lost: dict[str, int] = {}
    caught: dict[str, int] = {}
    for d in gate.get("dropped", ()):
        lost[d["kind"]] = lost.get(d["kind"], 0) + 1
    for c in gate.get("caught", ()):
        caught[c["kind"]] = caught.get(c["kind"], 0) + 1
    for kind, n in (gate.get("probes") or {}).items():
        kept = n - lost.get(kind, 0) - caught.get(kind, 0)
        for outcome, count in (("kept", kept), ("patched", caught.get(kind, 0))):
            if count:
                GATE_PROBES.labels(kind, outcome).inc(count)
        if lost.get(kind):
            GATE_PROBES.labels(kind, "dropped").inc(lost[kind])
