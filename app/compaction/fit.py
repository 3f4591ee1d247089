"""A summary checked against its brief, patched and fitted to its cap, and made an outcome.

The model's answer and the extractive summary go through the same steps: `check`
says which anchors, identifiers and constraints the final context would lack and
whether the language is right; `fit` fits the summary to the cap of SPEC §5 and
patches back in what the fit took away; `finish` makes the `SummaryOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from app.compaction.brief import Brief
from app.compaction.checks import language_matches, missing_anchors, missing_identifiers
from app.compaction.extractive import extractive_summary, fit_to_tokens, tokens_over_cap
from app.compaction.gate import Probe, Verdict, Visible
from app.compaction.outcome import ModelUsage, SummaryOutcome
from app.compaction.provenance import CiteStats, cite, cite_seqs, strip_cites
from app.compaction.summary import (
    SECTIONS,
    StructuredSummary,
    SummaryRejected,
    merge_summaries,
    parse_summary_output,
    render_summary,
)


@dataclass(frozen=True, slots=True)
class Check:
    summary: StructuredSummary
    rendered: str
    missing_anchors: list[str]
    missing_identifiers: list[str]
    language_ok: bool
    missing_constraints: list[str]
    # Probes of the gate the final context would not keep (fitting or not: see gate.py).
    missing_probes: list[Probe]
    citations: CiteStats

    @property
    def missing_fitting(self) -> list[Probe]:
        return [p for p in self.missing_probes if p.fits]


@dataclass(frozen=True, slots=True)
class Patch:
    """What contextd adds to a summary so that nothing it must keep is lost."""

    identifiers: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    anchors: tuple[str, ...] = ()
    probes: tuple[Probe, ...] = ()


# Fit, re-check and patch at most this often; each round trims by what the last overshot
# (one or two rounds in practice).
_FIT_ROUNDS = 6


def read(brief: Brief, answer: str) -> Check:
    """The model's answer parsed, its citations checked, and checked; raises SummaryRejected."""
    stats = CiteStats()
    summary = parse_summary_output(answer)
    content = "\n".join(strip_cites(i) for name in SECTIONS for i in getattr(summary, name))
    if not language_matches(content, brief.lang):
        return check(brief, summary, stats)  # retried or replaced for its language first
    return check(brief, cited(brief, summary, stats), stats)


def cited(brief: Brief, summary: StructuredSummary, stats: CiteStats) -> StructuredSummary:
    """Each item of the model's sections with a citation the log supports (provenance.py);
    an item nothing supports, or that repeats the instructions, is dropped and counted."""
    values = {
        name: tuple(
            checked
            for item in getattr(summary, name)
            if (checked := brief.sources.check(item, stats)) is not None
        )
        for name in SECTIONS
    }
    out = replace(summary, **values)
    if out.is_empty():
        raise SummaryRejected("all_empty", "no item of the answer is borne out by the range")
    return out


def check(brief: Brief, summary: StructuredSummary, stats: CiteStats | None = None) -> Check:
    full = replace(
        summary,
        pinned=brief.pinned,
        user_messages=brief.user_messages,
        artifacts=brief.artifacts,
        carried_anchors=(),
    )
    rendered = render_summary(full, brief.lang, through_seq=brief.plan.new_watermark)
    visible = [*brief.system_texts, rendered, *brief.preserved_texts]
    content = "\n".join(strip_cites(i) for name in SECTIONS for i in getattr(summary, name))
    return Check(
        full,
        rendered,
        missing_anchors(brief.anchors, visible),
        missing_identifiers(brief.identifiers, rendered),
        language_matches(content, brief.lang),
        missing_anchors(brief.constraints, visible),
        _context(brief, rendered).missing(brief.probes),
        stats or CiteStats(),
    )


def _context(brief: Brief, rendered: str) -> Visible:
    base = brief.context if brief.context is not None else Visible([])
    return base.plus([rendered])


def problems(check: Check) -> int:
    """How bad a checked answer is: anchors first, then the language, constraints, identifiers."""
    return (
        len(check.missing_anchors) * 1000
        + (not check.language_ok) * 100
        + len(check.missing_constraints) * 10
        + len(check.missing_fitting) * 10
        + len(check.missing_identifiers)
    )


def finish(
    brief: Brief,
    check: Check,
    usage: ModelUsage,
    *,
    status: Literal["success", "degraded"],
    summarizer: Literal["model", "extractive"],
    retried: bool,
    reason: str | None,
    answer: Check | None = None,
    fallback: bool = False,
) -> SummaryOutcome:
    """The outcome of `check`'s summary, fitted and patched, with the gate's verdict.

    `answer` is the summariser's first answer, when `check` is not (a retry's or the
    extractive fallback's): the gate reports what that answer missed and what restored
    it. `fallback`: this is the extractive summary standing in for the model's.
    """
    summary, patch = fit(brief, check.summary)
    rendered = render_summary(summary, brief.lang, through_seq=brief.plan.new_watermark)
    first = answer or check
    final = _context(brief, rendered).missing(brief.probes)
    restored: dict[Probe, str] = {}
    for p in first.missing_probes:
        if p in final:
            continue
        if fallback:
            restored[p] = "extractive"
        elif p in check.missing_probes:
            restored[p] = "patch"
        else:
            restored[p] = "retry"
    action = "none"
    if fallback and first.missing_fitting:
        action = "extractive"
    elif "patch" in restored.values() or patch.probes:
        action = "patch"
    elif "retry" in restored.values():
        action = "retry"
    # The items dropped from the answer whose items are stored (the model's), or from the
    # model's first answer when the extractive summary stands in for it.
    cites = (first if fallback else check).citations
    verdict = Verdict(
        brief.probes, tuple(first.missing_probes), tuple(final), action, restored,
        cites.to_dict(),
    )  # fmt: skip
    return SummaryOutcome(
        status=status,
        summarizer=summarizer,
        summary=summary,
        rendered_text=rendered,
        summary_tokens=brief.counter.count_text(rendered),
        language=brief.lang,
        anchor_validation_passed=not check.missing_anchors,
        anchor_retry_used=retried,
        missing_anchors=patch.anchors,
        patched_identifiers=patch.identifiers,
        patched_constraints=patch.constraints,
        artifacts_dropped=brief.artifacts_dropped,
        model_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        input_tokens=brief.input_tokens,
        reason=reason,
        gate=verdict.record(),
        invented_dropped=cites.dropped,
    )


def extractive(
    brief: Brief,
    usage: ModelUsage,
    status: Literal["success", "degraded"],
    reason: str | None,
    retried: bool = False,
    answer: Check | None = None,
) -> SummaryOutcome:
    """The extractive summary of the range, rolled onto the previous one, as an outcome."""
    new = extractive_summary(brief.plan.range_messages, lang=brief.lang)
    merged = merge_summaries(brief.previous, new, max_timeline=brief.options.max_timeline)
    merged = replace(
        merged,
        pinned=brief.pinned,
        user_messages=brief.user_messages,
        artifacts=brief.artifacts,
        carried_anchors=(),
    )
    fitted = _fit_to(brief, merged, brief.cap)
    return finish(
        brief,
        check(brief, fitted),
        usage,
        status=status,
        summarizer="extractive",
        retried=retried,
        reason=reason,
        answer=answer,
        fallback=answer is not None,
    )


def fit(brief: Brief, summary: StructuredSummary) -> tuple[StructuredSummary, Patch]:
    """`summary` fitted to the cap with what it must keep patched in after the fit.

    Checking before the fit is not enough: an identifier, constraint or anchor the
    check saw in an old timeline entry is gone once the fit drops that entry. So
    the summary is fitted first, what is then missing is patched in, and when the
    patch pushes it past the cap the rest is fitted to the cap less the overshoot
    and checked again. Only a patch larger than the whole cap is itself trimmed
    (facts before constraints: the cap of SPEC §5 holds over both); carried anchors
    are outside the cap, like pinned messages.
    """
    limit = brief.cap
    for _ in range(_FIT_ROUNDS):
        fitted = _fit_to(brief, summary, limit)
        patch = _missing(brief, fitted)
        result = _patched(brief, fitted, patch)
        over = _over_cap(brief, result)
        if over <= 0:
            return result, patch
        # Room for the patch: the rest shrinks below its own size by the overshoot
        # (below `limit` is not enough: it may already fit well under it).
        limit = brief.cap + _over_cap(brief, fitted) - over
        if limit < 0:
            break
    last = _fit_to(brief, result, brief.cap)
    # The patch itself was trimmed: it reports what the stored summary still shows.
    lost = _missing(brief, last)
    kept = Patch(
        identifiers=tuple(i for i in patch.identifiers if i not in lost.identifiers),
        constraints=tuple(c for c in patch.constraints if c not in lost.constraints),
        anchors=patch.anchors,  # carried outside the cap: never trimmed
        probes=tuple(p for p in patch.probes if p not in lost.probes),
    )
    return last, kept


def _missing(brief: Brief, summary: StructuredSummary) -> Patch:
    """What `summary` must show and does not: anchors and constraints in the final context,
    identifiers in the summary itself."""
    rendered = render_summary(summary, brief.lang, through_seq=brief.plan.new_watermark)
    visible = [*brief.system_texts, rendered, *brief.preserved_texts]
    return Patch(
        identifiers=tuple(missing_identifiers(brief.identifiers, rendered)),
        constraints=tuple(missing_anchors(brief.constraints, visible)),
        anchors=tuple(missing_anchors(brief.anchors, visible)),
        probes=tuple(p for p in _context(brief, rendered).missing(brief.probes) if p.fits),
    )


# Where a probe the summary lost is patched in, from the range, citing its seqs.
_PATCH_SECTION = {
    "constraint": "user_prefs",
    "question": "open_todos",
    "decision": "decisions",
    "todo": "open_todos",
    "error": "open_todos",
    "artifact": "artifacts",
}
_UNRESOLVED = {"en": "Unresolved: ", "zh": "未解决："}


def _patched(brief: Brief, summary: StructuredSummary, patch: Patch) -> StructuredSummary:
    if patch.identifiers:
        label = "涉及的标识：" if brief.lang == "zh" else "Identifiers: "
        extra = label + ", ".join(patch.identifiers)
        summary = replace(summary, facts=(*summary.facts, _cite(brief, extra)))
    if patch.constraints:
        # Missing after the retry, or trimmed by the fit: carried verbatim rather than lost.
        prefs = (_cite(brief, c) for c in patch.constraints)
        summary = replace(summary, user_prefs=(*summary.user_prefs, *prefs))
    for p in patch.probes:
        name = _PATCH_SECTION[p.kind]
        label = _UNRESOLVED.get(brief.lang, _UNRESOLVED["en"]) if p.kind == "error" else ""
        item = cite_seqs(label + p.text, p.seqs)
        summary = replace(summary, **{name: (*getattr(summary, name), item)})
    return replace(summary, carried_anchors=patch.anchors)


def _cite(brief: Brief, text: str) -> str:
    """`text` citing the seqs that hold it best (none when it is not from the log)."""
    return cite(text, brief.sources.best(text) or ())


def _fit_to(brief: Brief, summary: StructuredSummary, limit: int) -> StructuredSummary:
    return fit_to_tokens(
        summary,
        lang=brief.lang,
        max_tokens=limit,
        counter=brief.counter,
        through_seq=brief.plan.new_watermark,
    )


def _over_cap(brief: Brief, summary: StructuredSummary) -> int:
    return tokens_over_cap(
        summary,
        lang=brief.lang,
        max_tokens=brief.cap,
        counter=brief.counter,
        through_seq=brief.plan.new_watermark,
    )
