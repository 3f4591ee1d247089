"""What any summary of a compaction plan must keep, read off the messages before anyone writes.

The identifiers, constraints, pinned entries, user messages and artifacts to carry,
the conversation's language and the output cap are the same whether the model or
the extractive summariser writes the prose: `brief_for` works them out once, and
the engine (`engine.py`) and the checks and fit (`fit.py`) read the `Brief`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Protocol

from app.compaction import gate
from app.compaction.artifacts import range_artifacts, roll_artifacts
from app.compaction.checks import (
    constraints_to_keep,
    conversation_language_of,
    identifiers_to_keep,
    message_texts,
)
from app.compaction.extractive import pinned_entries
from app.compaction.prompt import instruction_text
from app.compaction.provenance import Sources
from app.compaction.summary import (
    StructuredSummary,
    dedupe,
    render_summary,
    summary_token_cap,
)
from app.compaction.turns import CompactionPlan
from app.compaction.user_messages import range_user_messages, roll_user_messages
from app.core.conversation import LoggedMessage
from app.core.tokens.counter import TextCounter


class SummarySettings(Protocol):
    """The `CompactionSettings` fields the engine reads."""

    @property
    def summary_temperature(self) -> float: ...
    @property
    def compact_timeout_s(self) -> float: ...
    @property
    def anchor_retry_enabled(self) -> bool: ...
    @property
    def user_messages_ratio(self) -> float: ...
    @property
    def artifacts_ratio(self) -> float: ...
    @property
    def usable_budget(self) -> int: ...


@dataclass(frozen=True, slots=True)
class SummaryOptions:
    """Engine knobs beyond SPEC §4 (candidates for `COMPACTION_*` settings)."""

    output_ratio: float = 0.3
    min_output_tokens: int = 256
    max_output_tokens: int = 4096
    max_timeline: int = 40
    max_identifiers: int = 40
    json_mode: bool = True


@dataclass(frozen=True, slots=True)
class Brief:
    """One summary's inputs and what it must keep (see the module docstring)."""

    plan: CompactionPlan
    previous: StructuredSummary | None
    anchors: Sequence[str]
    # The other always-visible parts of the final context (system prompt, dynamic
    # context), in which anchors may already be visible.
    system_texts: Sequence[str]
    counter: TextCounter
    options: SummaryOptions
    lang: str
    identifiers: list[str]
    constraints: list[str]
    pinned: tuple[str, ...]
    user_messages: tuple[str, ...]
    artifacts: tuple[str, ...]
    artifacts_dropped: int
    cap: int
    input_tokens: int
    preserved_texts: list[str]
    # What the quality gate checks (gate.py), drawn before any summary is written.
    probes: tuple[gate.Probe, ...] = ()
    # What citations are checked against (provenance.py).
    sources: Sources = field(default_factory=Sources)
    # The final context but the summary (system texts, preserved history), for the gate.
    context: gate.Visible | None = None


def brief_for(
    plan: CompactionPlan,
    previous_summary: StructuredSummary | None,
    anchors: Sequence[str],
    settings: SummarySettings,
    counter: TextCounter,
    system_texts: Sequence[str],
    options: SummaryOptions | None,
    earlier: Sequence[LoggedMessage] = (),
) -> Brief:
    """What any summary of `plan` must keep, model or not: read off the messages, not asked for.
    `earlier`: the last messages before the range (values tools returned there, reused in
    the range, join its trail: `artifacts.range_artifacts`)."""
    opts = options or SummaryOptions()
    lang = conversation_language_of((*plan.range_messages, *plan.preserved_messages))
    prev_tokens = (
        counter.count_text(render_summary(previous_summary, lang)) if previous_summary else 0
    )
    previous_pinned = previous_summary.pinned if previous_summary else ()
    preserved = message_texts(plan.preserved_messages)
    user_messages, folded = roll_user_messages(
        previous_summary.user_messages if previous_summary else (),
        range_user_messages(plan.range_messages),
        max_tokens=int(settings.user_messages_ratio * settings.usable_budget),
        counter=counter,
    )
    trail = range_artifacts(plan.range_messages, plan.preserved_messages, earlier)
    artifacts, dropped = roll_artifacts(
        previous_summary.artifacts if previous_summary else (),
        trail,
        max_tokens=int(settings.artifacts_ratio * settings.usable_budget),
        counter=counter,
    )
    brief = Brief(
        plan=plan,
        previous=previous_summary,
        anchors=[a for a in anchors if a.strip()],
        system_texts=system_texts,
        counter=counter,
        options=opts,
        lang=lang,
        identifiers=identifiers_to_keep(
            message_texts(plan.range_messages),
            preserved,
            limit=opts.max_identifiers,
        ),
        constraints=constraints_to_keep(
            plan.range_messages,
            previous_summary.user_prefs if previous_summary else (),
            folded,
            max_tokens=int(settings.user_messages_ratio * settings.usable_budget),
            counter=counter,
        ),
        pinned=dedupe((*previous_pinned, *pinned_entries(plan.range_messages, lang))),
        user_messages=user_messages,
        artifacts=artifacts,
        artifacts_dropped=len(dropped),
        # A share of what is folded, and never more than that share of the window the
        # summary is sent in: a range larger than the window (long tool outputs) would
        # otherwise buy a summary that does not fit it.
        cap=summary_token_cap(
            min(plan.range_tokens + prev_tokens, settings.usable_budget),
            opts.output_ratio,
            opts.min_output_tokens,
            opts.max_output_tokens,
        ),
        input_tokens=plan.range_tokens + prev_tokens,
        preserved_texts=preserved,
    )
    previous_items = (
        [i for f in fields(previous_summary) for i in getattr(previous_summary, f.name)]
        if previous_summary
        else []
    )
    return replace(
        brief,
        probes=gate.draw(
            plan.range_messages,
            plan.preserved_messages,
            range_artifacts=trail,
            kept_artifacts=artifacts,
            user_share=int(settings.user_messages_ratio * settings.usable_budget),
            # Half the cap: the rest of the summary needs room too.
            summary_share=brief.cap // 2,
            counter=counter,
        ),
        sources=Sources.of(
            plan.range_messages,
            previous_items,
            own=[*brief.anchors, *system_texts],
            instructions=instruction_text(),
        ),
        context=gate.Visible([*system_texts, *preserved]),
    )
