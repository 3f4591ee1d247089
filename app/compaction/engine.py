"""Summarise one compaction plan: model call, checks, one retry, fallbacks (SPEC §5).

No database, no job bookkeeping: the runner plans, calls `summarise`, then
stores the outcome with its fenced update. The outcome is always something
that can be stored; `summarise` only raises on bugs (the runner's fail-open
path handles those). What any summary must keep is read off the messages first
(`brief.py`); the answer is checked, fitted and patched in `fit.py`.

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
  fitted to its cap, and what the fit took away is patched back in (`fit.fit`);
- timeout, HTTP error, dropped connection, refusal, unparseable or
  schema-violating output, or a summary in the wrong language after the retry
  → the extractive summary of the range, `degraded`;
- items of the answer that nothing of the log supports (invented) or that repeat
  the instructions (echoed) are dropped and listed in the job's `gate`
  (`citations`, provenance.py) and counted in `invented_dropped`; an answer with
  more such items than supported ones → the extractive summary, `degraded`
  (`invented`): never stored silently invented;
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
from typing import Any, TypeVar

from app.compaction import brief as briefs
from app.compaction import fit
from app.compaction.brief import SummaryOptions, SummarySettings
from app.compaction.model_client import ChatModelClient, ChatResult, ModelError, ModelTimeout
from app.compaction.outcome import ModelUsage, SummaryOutcome
from app.compaction.prompt import SummaryRequest, build_retry_request, build_summary_request
from app.compaction.summary import StructuredSummary, SummaryRejected
from app.compaction.turns import CompactionPlan
from app.core.conversation import LoggedMessage
from app.core.tokens.counter import TextCounter

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


async def _call(
    client: ChatModelClient,
    request: SummaryRequest,
    settings: SummarySettings,
    usage: ModelUsage,
    counter: TextCounter,
) -> ChatResult:
    usage.calls += 1
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
    if result.usage_reported:
        usage.prompt_tokens += result.prompt_tokens
        usage.completion_tokens += result.completion_tokens
    else:  # an endpoint that does not count (llama.cpp streams, some proxies): our count
        sent = "\n".join(str(m.get("content") or "") for m in request.messages)
        usage.prompt_tokens += counter.count_text(sent)
        usage.completion_tokens += counter.count_text(result.text)
    return result


def _whole(result: ChatResult) -> ChatResult:
    """The answer, unless the model stopped at its output cap: a cut-off summary is not a
    summary, whatever fragment of it still parses as an object."""
    if result.finish_reason == "length":
        raise SummaryRejected("truncated", "the model stopped at its output cap")
    return result


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
    earlier: Sequence[LoggedMessage] = (),
) -> SummaryOutcome:
    """Summarise `plan.range_messages` onto `previous_summary` (see the module docstring).

    `system_texts` are the other always-visible parts of the final context
    (system prompt, dynamic context) in which anchors may already be visible;
    `earlier` the last messages before the range (see `brief.brief_for`).
    """
    brief = await _off_loop(
        briefs.brief_for,
        plan,
        previous_summary,
        anchors,
        settings,
        counter,
        system_texts,
        options,
        earlier,
    )
    usage = ModelUsage()
    if client is None:
        return await _off_loop(fit.extractive, brief, usage, "success", None)
    request = await _off_loop(
        build_summary_request,
        plan.range_messages,
        previous=previous_summary,
        anchors=brief.anchors,
        identifiers=brief.identifiers,
        lang=brief.lang,
        temperature=settings.summary_temperature,
        max_tokens=brief.cap,
        json_mode=brief.options.json_mode,
    )
    try:
        first = _whole(await _call(client, request, settings, usage, counter))
        check = await _off_loop(fit.read, brief, first.text)
    except ModelError as exc:
        return await _off_loop(fit.extractive, brief, usage, "degraded", exc.code)
    except SummaryRejected as exc:
        why = f"invalid_output:{exc.reason}"
        return await _off_loop(fit.extractive, brief, usage, "degraded", why)
    retried = False
    first_check = check
    if fit.problems(check) and settings.anchor_retry_enabled:
        retried = True
        retry = build_retry_request(
            request,
            first.text,
            missing_anchors=check.missing_anchors,
            missing_identifiers=check.missing_identifiers,
            missing_constraints=check.missing_constraints,
            wrong_language=None if check.language_ok else brief.lang,
            missing_probes=[p.cited() for p in check.missing_fitting],
        )
        try:
            answer = _whole(await _call(client, retry, settings, usage, counter)).text
            second: fit.Check | None = await _off_loop(fit.read, brief, answer)
        except (ModelError, SummaryRejected):
            second = None  # the first answer is still a valid summary; keep it
        if second is not None and fit.problems(second) <= fit.problems(check):
            check = second
    if not check.language_ok:
        return await _off_loop(fit.extractive, brief, usage, "degraded", "wrong_language", retried)
    if _mostly_invented(check):
        # More of the answer made up than borne out: what is left of it is no summary to
        # trust either. The extractive summary instead; the gate lists what was dropped.
        return await _off_loop(fit.extractive, brief, usage, "degraded", "invented", retried, check)
    reason = None
    if check.missing_anchors:
        reason = "anchors_missing_after_retry" if retried else "anchors_missing"
    outcome = await _off_loop(
        fit.finish,
        brief,
        check,
        usage,
        status="degraded" if reason else "success",
        summarizer="model",
        retried=retried,
        reason=reason,
        answer=first_check,
    )
    if not _lost_fitting(outcome):
        return outcome
    # Retried and patched, and still short of what fits its share (the patch itself did
    # not fit): the extractive summary of the range instead, never a silently lossy one.
    return await _off_loop(
        fit.extractive, brief, usage, "degraded", "gate_dropped", retried, first_check
    )


def _mostly_invented(check: fit.Check) -> bool:
    c = check.citations
    return c.dropped > c.kept + c.corrected


def _lost_fitting(outcome: SummaryOutcome) -> bool:
    gate = outcome.gate or {}
    return any(not d.get("over_share") for d in gate.get("dropped", ()))
