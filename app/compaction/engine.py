"""Summarise one compaction plan: model call, checks, one retry, fallbacks (SPEC §5).

No database, no job bookkeeping: the runner plans, calls `summarise`, then
stores the outcome with its fenced update. The outcome is always something
that can be stored; `summarise` only raises on bugs (the runner's fail-open
path handles those).

Outcomes:

The user's own messages of the range roll into the `user_messages` section
verbatim on every path (see `user_messages.py`); the model is not asked to
copy them, and they count as visible for the anchor and constraint checks.
The agent's trail (files, commands and how they ended, values tools returned)
rolls into `artifacts` the same way (see `artifacts.py`).

- model answered with a valid summary and every anchor is visible in the
  final context (system texts + summary + preserved history) → `success`;
- anchors, identifiers or the language were wrong → one retry naming what is
  missing (if `anchor_retry_enabled`); anchors still missing → `degraded`,
  with the missing anchors carried verbatim. Identifiers still missing are
  appended verbatim to `facts` and do not degrade: the summary is otherwise
  the model's and good. All of this is checked again after the summary is
  fitted to its cap, and what the fit took away is patched back in (`_Run.fit`);
- timeout, HTTP error, dropped connection, refusal, unparseable or
  schema-violating output, or a summary in the wrong language after the retry
  → the extractive summary of the range, `degraded`;
- no model configured (`client is None`) → the extractive summary, `success`
  with `summarizer="extractive"`: that is the deliberate configuration of
  SPEC §7, not a failure.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, TypeVar

from app.compaction.artifacts import range_artifacts, roll_artifacts
from app.compaction.checks import (
    constraints_to_keep,
    conversation_language_of,
    identifiers_to_keep,
    language_matches,
    message_texts,
    missing_anchors,
    missing_identifiers,
)
from app.compaction.extractive import (
    extractive_summary,
    fit_to_tokens,
    pinned_entries,
    tokens_over_cap,
)
from app.compaction.llm import ChatModelClient, ChatResult, ModelError, ModelTimeout
from app.compaction.outcome import SummaryOutcome
from app.compaction.prompt import SummaryRequest, build_retry_request, build_summary_request
from app.compaction.summary import (
    SECTIONS,
    StructuredSummary,
    SummaryRejected,
    TextCounter,
    dedupe,
    merge_summaries,
    parse_summary_output,
    render_summary,
    summary_token_cap,
)
from app.compaction.turns import CompactionPlan
from app.compaction.user_messages import range_user_messages, roll_user_messages


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
class _Check:
    summary: StructuredSummary
    rendered: str
    missing_anchors: list[str]
    missing_identifiers: list[str]
    language_ok: bool
    missing_constraints: list[str]


@dataclass(frozen=True, slots=True)
class _Patch:
    """What contextd adds to a summary so that nothing it must keep is lost."""

    identifiers: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    anchors: tuple[str, ...] = ()


# Fit, re-check and patch at most this often; each round trims by what the last overshot
# (one or two rounds in practice).
_FIT_ROUNDS = 6


@dataclass(slots=True)
class _Run:
    plan: CompactionPlan
    previous: StructuredSummary | None
    anchors: Sequence[str]
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
    preserved_texts: list[str] | None = None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def read(self, answer: str) -> _Check:
        """The model's answer parsed and checked; raises SummaryRejected."""
        return self.check(parse_summary_output(answer))

    def check(self, summary: StructuredSummary) -> _Check:
        full = replace(
            summary,
            pinned=self.pinned,
            user_messages=self.user_messages,
            artifacts=self.artifacts,
            carried_anchors=(),
        )
        rendered = render_summary(full, self.lang, through_seq=self.plan.new_watermark)
        visible = [*self.system_texts, rendered, *message_texts(self.plan.preserved_messages)]
        content = "\n".join(i for name in SECTIONS for i in getattr(summary, name))
        return _Check(
            full,
            rendered,
            missing_anchors(self.anchors, visible),
            missing_identifiers(self.identifiers, rendered),
            language_matches(content, self.lang),
            missing_anchors(self.constraints, visible),
        )

    def finish(
        self,
        check: _Check,
        *,
        status: Literal["success", "degraded"],
        summarizer: Literal["model", "extractive"],
        retried: bool,
        reason: str | None,
    ) -> SummaryOutcome:
        summary, patch = self.fit(check.summary)
        rendered = render_summary(summary, self.lang, through_seq=self.plan.new_watermark)
        return SummaryOutcome(
            status=status,
            summarizer=summarizer,
            summary=summary,
            rendered_text=rendered,
            summary_tokens=self.counter.count_text(rendered),
            language=self.lang,
            anchor_validation_passed=not check.missing_anchors,
            anchor_retry_used=retried,
            missing_anchors=patch.anchors,
            patched_identifiers=patch.identifiers,
            patched_constraints=patch.constraints,
            artifacts_dropped=self.artifacts_dropped,
            model_calls=self.calls,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            input_tokens=self.input_tokens,
            reason=reason,
        )

    def missing(self, summary: StructuredSummary) -> _Patch:
        """What `summary` must show and does not: anchors and constraints in the final context,
        identifiers in the summary itself."""
        rendered = render_summary(summary, self.lang, through_seq=self.plan.new_watermark)
        if self.preserved_texts is None:
            self.preserved_texts = message_texts(self.plan.preserved_messages)
        visible = [*self.system_texts, rendered, *self.preserved_texts]
        return _Patch(
            identifiers=tuple(missing_identifiers(self.identifiers, rendered)),
            constraints=tuple(missing_anchors(self.constraints, visible)),
            anchors=tuple(missing_anchors(self.anchors, visible)),
        )

    def patched(self, summary: StructuredSummary, patch: _Patch) -> StructuredSummary:
        if patch.identifiers:
            label = "涉及的标识：" if self.lang == "zh" else "Identifiers: "
            extra = label + ", ".join(patch.identifiers)
            summary = replace(summary, facts=(*summary.facts, extra))
        if patch.constraints:
            # Missing after the retry, or trimmed by the fit: carried verbatim rather than lost.
            summary = replace(summary, user_prefs=(*summary.user_prefs, *patch.constraints))
        return replace(summary, carried_anchors=patch.anchors)

    def over_cap(self, summary: StructuredSummary) -> int:
        return tokens_over_cap(
            summary,
            lang=self.lang,
            max_tokens=self.cap,
            counter=self.counter,
            through_seq=self.plan.new_watermark,
        )

    def fit(self, summary: StructuredSummary) -> tuple[StructuredSummary, _Patch]:
        """`summary` fitted to the cap with what it must keep patched in after the fit.

        Checking before the fit is not enough: an identifier, constraint or anchor the
        check saw in an old timeline entry is gone once the fit drops that entry. So
        the summary is fitted first, what is then missing is patched in, and when the
        patch pushes it past the cap the rest is fitted to the cap less the overshoot
        and checked again. Only a patch larger than the whole cap is itself trimmed
        (facts before constraints: the cap of SPEC §5 holds over both); carried anchors
        are outside the cap, like pinned messages.
        """
        limit = self.cap
        for _ in range(_FIT_ROUNDS):
            fitted = fit_to_tokens(
                summary,
                lang=self.lang,
                max_tokens=limit,
                counter=self.counter,
                through_seq=self.plan.new_watermark,
            )
            patch = self.missing(fitted)
            result = self.patched(fitted, patch)
            over = self.over_cap(result)
            if over <= 0:
                return result, patch
            # Room for the patch: the rest shrinks below its own size by the overshoot
            # (below `limit` is not enough: it may already fit well under it).
            limit = self.cap + self.over_cap(fitted) - over
            if limit < 0:
                break
        last = fit_to_tokens(
            result,
            lang=self.lang,
            max_tokens=self.cap,
            counter=self.counter,
            through_seq=self.plan.new_watermark,
        )
        # The patch itself was trimmed: it reports what the stored summary still shows.
        lost = self.missing(last)
        kept = _Patch(
            identifiers=tuple(i for i in patch.identifiers if i not in lost.identifiers),
            constraints=tuple(c for c in patch.constraints if c not in lost.constraints),
            anchors=patch.anchors,  # carried outside the cap: never trimmed
        )
        return last, kept

    def extractive(
        self, status: Literal["success", "degraded"], reason: str | None, retried: bool = False
    ) -> SummaryOutcome:
        new = extractive_summary(self.plan.range_messages, lang=self.lang)
        merged = merge_summaries(self.previous, new, max_timeline=self.options.max_timeline)
        merged = replace(
            merged,
            pinned=self.pinned,
            user_messages=self.user_messages,
            artifacts=self.artifacts,
            carried_anchors=(),
        )
        fitted = fit_to_tokens(
            merged,
            lang=self.lang,
            max_tokens=self.cap,
            counter=self.counter,
            through_seq=self.plan.new_watermark,
        )
        return self.finish(
            self.check(fitted),
            status=status,
            summarizer="extractive",
            retried=retried,
            reason=reason,
        )

    async def call(
        self, client: ChatModelClient, request: SummaryRequest, settings: SummarySettings
    ) -> ChatResult:
        self.calls += 1
        try:
            async with asyncio.timeout(settings.compact_timeout_s):
                result = await client.complete(
                    request.messages,
                    temperature=request.temperature,
                    max_tokens=request.max_tokens,
                    timeout_s=settings.compact_timeout_s,
                    response_format=request.response_format,
                )
        except TimeoutError as exc:
            raise ModelTimeout(f"no answer within {settings.compact_timeout_s:g}s") from exc
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        return result


def _problems(check: _Check) -> int:
    return (
        len(check.missing_anchors) * 1000
        + (not check.language_ok) * 100
        + len(check.missing_constraints) * 10
        + len(check.missing_identifiers)
    )


def _prepare(
    plan: CompactionPlan,
    previous_summary: StructuredSummary | None,
    anchors: Sequence[str],
    settings: SummarySettings,
    counter: TextCounter,
    system_texts: Sequence[str],
    options: SummaryOptions | None,
) -> _Run:
    """What any summary of `plan` must keep, model or not: read off the messages, not asked for.

    The identifiers, constraints, pinned entries, user messages and artifacts to carry, the
    conversation's language and the output cap; `summarise` then only decides
    who writes the prose.
    """
    opts = options or SummaryOptions()
    lang = conversation_language_of((*plan.range_messages, *plan.preserved_messages))
    prev_tokens = (
        counter.count_text(render_summary(previous_summary, lang)) if previous_summary else 0
    )
    previous_pinned = previous_summary.pinned if previous_summary else ()
    preserved = message_texts(plan.preserved_messages)
    artifacts, dropped = roll_artifacts(
        previous_summary.artifacts if previous_summary else (),
        range_artifacts(plan.range_messages, plan.preserved_messages),
        max_tokens=int(settings.artifacts_ratio * settings.usable_budget),
        counter=counter,
    )
    return _Run(
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
            max_tokens=int(settings.user_messages_ratio * settings.usable_budget),
            counter=counter,
        ),
        pinned=dedupe((*previous_pinned, *pinned_entries(plan.range_messages, lang))),
        user_messages=roll_user_messages(
            previous_summary.user_messages if previous_summary else (),
            range_user_messages(plan.range_messages),
            max_tokens=int(settings.user_messages_ratio * settings.usable_budget),
            counter=counter,
        )[0],
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


# What surrounds the model call (identifiers and constraints read off the range,
# the prompt, the checks, the fit, the extractive summary) is CPU in proportion to
# the range: ~0.8 ms per 1,000 characters, 0.25 s for a range of 300k (2.5 ms and
# 0.4 s for 150k before identifiers were read line by line). Run in the
# event loop, that stalls every request of a server that compacts in process; in a
# thread it takes the interpreter in slices of sys.getswitchinterval() (5 ms).
# Threads of its own, not the loop's default executor, where a large append counts
# its tokens (app/messages/service.py): with CONTEXTD_COMPACTION_WORKERS summaries
# at once, that append would otherwise wait for one of them to end. Two threads:
# more would share the same interpreter, not add CPU.
_THREADS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="contextd-summary")
T = TypeVar("T")


async def _off_loop(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    return await loop.run_in_executor(_THREADS, call)


async def summarise(
    plan: CompactionPlan,
    previous_summary: StructuredSummary | None,
    anchors: Sequence[str],
    *,
    client: ChatModelClient | None,
    settings: SummarySettings,
    counter: TextCounter,
    system_texts: Sequence[str] = (),
    options: SummaryOptions | None = None,
) -> SummaryOutcome:
    """Summarise `plan.range_messages` onto `previous_summary` (see the module docstring).

    `system_texts` are the other always-visible parts of the final context
    (system prompt, dynamic context) in which anchors may already be visible.
    """
    run = await _off_loop(
        _prepare, plan, previous_summary, anchors, settings, counter, system_texts, options
    )
    if client is None:
        return await _off_loop(run.extractive, "success", None)
    request = await _off_loop(
        build_summary_request,
        plan.range_messages,
        previous=previous_summary,
        anchors=run.anchors,
        identifiers=run.identifiers,
        lang=run.lang,
        temperature=settings.summary_temperature,
        max_tokens=run.cap,
        json_mode=run.options.json_mode,
    )
    try:
        first = await run.call(client, request, settings)
        check = await _off_loop(run.read, first.text)
    except ModelError as exc:
        return await _off_loop(run.extractive, "degraded", exc.code)
    except SummaryRejected as exc:
        return await _off_loop(run.extractive, "degraded", f"invalid_output:{exc.reason}")
    retried = False
    if _problems(check) and settings.anchor_retry_enabled:
        retried = True
        retry = build_retry_request(
            request,
            first.text,
            missing_anchors=check.missing_anchors,
            missing_identifiers=check.missing_identifiers,
            missing_constraints=check.missing_constraints,
            wrong_language=None if check.language_ok else run.lang,
        )
        try:
            second: _Check | None = await _off_loop(
                run.read, (await run.call(client, retry, settings)).text
            )
        except (ModelError, SummaryRejected):
            second = None  # the first answer is still a valid summary; keep it
        if second is not None and _problems(second) <= _problems(check):
            check = second
    if not check.language_ok:
        return await _off_loop(run.extractive, "degraded", "wrong_language", retried)
    if check.missing_anchors:
        why = "anchors_missing_after_retry" if retried else "anchors_missing"
        return await _off_loop(
            run.finish, check, status="degraded", summarizer="model", retried=retried, reason=why
        )
    return await _off_loop(
        run.finish, check, status="success", summarizer="model", retried=retried, reason=None
    )
