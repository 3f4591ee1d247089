"""`summary`: the compacted summary plus `sliding_window` over the effective history.

The pipeline renders the summary (a summary-class system message, "Summary of
the conversation so far (messages 1–N): …") right before the history; this
strategy makes it required, so it is kept even when the mandatory history then
goes over budget, where the other strategies give the summary up first.
"""

from __future__ import annotations

from app.context.strategies.base import register
from app.context.strategies.sliding_window import SlidingWindow


@register
class SummaryWindow(SlidingWindow):
    name = "summary"
    summary_required = True
