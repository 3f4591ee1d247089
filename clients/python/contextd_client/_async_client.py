"""`AsyncContextdClient`: the whole contextd API over an `httpx.AsyncClient`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from contextd_client import _api, _http
from contextd_client import _models as m
from contextd_client._api import Format, Order, SessionSettings
from contextd_client._client import TAIL_PAGE
from contextd_client._compact import answer_lost, finished_jobs, job_finished_since
from contextd_client._exceptions import (
    ClientClosed,
    ContextdError,
    TransportError,
    error_from_response,
)
from contextd_client._lease import HeldLease, releasing, renew_interval, renew_until_cancelled
from contextd_client._prefix import REMEMBERED, PrefixMemory, PreviousPrefix
from contextd_client._retry import Retry

T = TypeVar("T")


class AsyncContextdClient:
    """The asynchronous twin of `ContextdClient`: the same methods, awaited.

        async with AsyncContextdClient("http://127.0.0.1:8080") as ctx:
            await ctx.append("demo", [{"role": "user", "content": "hi"}])
            payload = await ctx.context("demo")

    `base_url` defaults to `$CONTEXTD_URL`, `api_key` to `$CONTEXTD_API_KEY`; an
    `Authorization` in `headers` (any case) wins over both. Pass `transport` to route
    requests elsewhere (an ASGI app, a `MockTransport`). Errors raise the classes
    drawn in `contextd_client._exceptions`; a closed client raises `ClientClosed`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 30.0,
        retry: Retry | None = None,
        headers: Mapping[str, str] | None = None,
        echo_prefix_ids: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or Retry()
        self.prefix_ids = PrefixMemory(echo_prefix_ids)
        self._http = httpx.AsyncClient(
            base_url=_http.base_url(base_url),
            headers=_http.headers(api_key, headers),
            timeout=timeout,
            transport=transport,
        )
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncContextdClient:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _send(self, call: _api.Call[T]) -> T:
        if self._http.is_closed:
            raise ClientClosed("this AsyncContextdClient is closed")
        timeout = _http.timeout_for(self._http.timeout, call.read_timeout)
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.body if call.has_body else None,
                    timeout=timeout,
                )
            except httpx.TransportError as exc:
                delay = self.retry.after_error(attempt, call.idempotent) if call.retried else None
                if delay is None:
                    raise TransportError(f"{call.method} {call.path}: {exc!r}") from exc
            else:
                if response.is_success or response.status_code in call.answers:
                    return call.parse(response)
                delay = (
                    self.retry.after_response(attempt, response, call.idempotent)
                    if call.retried
                    else None
                )
                if delay is None:
                    raise error_from_response(response)
            await self._sleep(delay)
            attempt += 1

    # sessions

    async def put_session(self, session_id: str, **settings: Unpack[SessionSettings]) -> m.Session:
        """Create or update a session; fields left out keep their stored value."""
        return await self._send(_api.put_session(session_id, settings))

    async def get_session(self, session_id: str) -> m.Session:
        return await self._send(_api.get_session(session_id))

    async def list_sessions(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> m.SessionPage:
        return await self._send(_api.list_sessions(limit, cursor))

    async def delete_session(self, session_id: str, *, lock_token: str | None = None) -> None:
        """Delete the session, its log and its settings (see `clear` to keep the settings)."""
        await self._send(_api.delete_session(session_id, lock_token))
        self.prefix_ids.forget(session_id)

    # messages

    async def append(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        lock_token: str | None = None,
    ) -> m.AppendResult:
        """Append messages atomically. Each gets an `id` (unless it has one) before the
        first attempt, so a retried append is stored once; `created` is False when the
        answer that arrived was a replay (see `AppendResult.created`)."""
        return await self._send(_api.append(session_id, messages, lock_token))

    async def messages(
        self,
        session_id: str,
        *,
        order: Order = "asc",
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        from_seq: int | None = None,
        to_seq: int | None = None,
        seqs: str | None = None,
        max_chars: int | None = None,
    ) -> m.MessagePage:
        """One page of the raw log; `order="desc"` reads from the tail (`before_seq`).

        A range: `from_seq`..`to_seq` (inclusive), or `seqs` as a summary item cites
        them (`"412-431"`, `"3,7-9"`; `next_seqs` is what a page did not reach).
        `max_chars` holds the page's text to that many characters: long messages are
        cut to a share, their `range` saying which characters they keep."""
        span = dict(from_seq=from_seq, to_seq=to_seq, seqs=seqs, max_chars=max_chars)
        return await self._send(
            _api.messages(session_id, order, after_seq, before_seq, limit, span)
        )

    async def tail(self, session_id: str, limit: int) -> list[m.Message]:
        """The last `limit` messages of the log, oldest first."""
        out: list[m.Message] = []
        before: int | None = None
        while len(out) < limit:
            want = min(TAIL_PAGE, limit - len(out))
            page = await self.messages(session_id, order="desc", before_seq=before, limit=want)
            out.extend(page.messages)
            if page.next_before_seq is None or not page.messages:
                break
            before = page.next_before_seq
        return out[::-1]

    async def message(
        self,
        session_id: str,
        seq: int,
        *,
        char_start: int | None = None,
        char_end: int | None = None,
        line_start: int | None = None,
        line_end: int | None = None,
    ) -> m.Message:
        """One message in full, or a character or line range of its text."""
        ranges = dict(
            char_start=char_start, char_end=char_end, line_start=line_start, line_end=line_end
        )
        return await self._send(_api.message(session_id, seq, ranges))

    async def search(
        self,
        session_id: str,
        q: str,
        *,
        limit: int | None = None,
        before_seq: int | None = None,
        roles: Sequence[str] | None = None,
    ) -> m.SearchResult:
        """Recall: full-text search over the whole log (compacted and trimmed messages
        included), best first; read a hit in full with `message(session_id, hit.seq)`."""
        return await self._send(_api.search(session_id, q, limit, before_seq, roles))

    async def delete_tail(
        self, session_id: str, from_seq: int, *, lock_token: str | None = None
    ) -> m.TailDeleteResult:
        """Remove the messages with `seq >= from_seq` (above the watermark only)."""
        return await self._send(_api.delete_tail(session_id, from_seq, lock_token))

    async def clear(self, session_id: str, *, lock_token: str | None = None) -> m.ClearResult:
        """Empty the log, summary and watermark; the settings stay."""
        return await self._send(_api.clear(session_id, lock_token))

    # context, budget

    async def context(
        self,
        session_id: str,
        *,
        max_tokens: int | None = None,
        strategy: str | None = None,
        mode: str | None = None,
        format: Format | None = None,
        reserve_output_tokens: int | None = None,
        system: str | list[dict[str, Any]] | None = None,
        tools: list[dict[str, Any]] | None = None,
        dynamic_context: list[str | dict[str, Any]] | None = None,
        preview_limit_tokens: int | None = None,
        recall: bool | None = None,
        previous_prefix_id: PreviousPrefix = REMEMBERED,
    ) -> m.Context:
        """The payload for the next model call. Per-call `system`, `tools` or
        `dynamic_context` make it a POST; otherwise the session's stored ones apply.

        `previous_prefix_id` defaults to the `prefix_id` this client got last for the
        same session and parameters (`contextd_client._prefix.STREAM_PARAMS`), which
        makes `usage.stable_prefix_tokens` exact; pass a string to send that one, or
        None to send none (the server then assumes only the newest step is new).
        `echo_prefix_ids=False` on the client turns the default off. `recall=True`
        adds the recall tool and a note on what was left out (`contextd_client.recall`
        runs the tool); None keeps the session's setting."""
        parts = dict(
            max_tokens=max_tokens, strategy=strategy, mode=mode, format=format,
            reserve_output_tokens=reserve_output_tokens, system=system, tools=tools,
            dynamic_context=dynamic_context, preview_limit_tokens=preview_limit_tokens,
            recall=recall,
        )  # fmt: skip
        stream = self.prefix_ids.key(session_id, parts)
        parts["previous_prefix_id"] = self.prefix_ids.resolve(stream, previous_prefix_id)
        payload = await self._send(_api.context(session_id, parts))
        self.prefix_ids.remember(stream, payload.prefix_id)
        return payload

    async def budget(self, session_id: str) -> m.Budget:
        return await self._send(_api.budget(session_id))

    async def preview_budget(
        self, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> m.BudgetPreview:
        """The budget after appending `messages`, and whether they fit; writes nothing."""
        return await self._send(_api.preview_budget(session_id, messages))

    async def report_usage(
        self,
        session_id: str,
        *,
        input_tokens: int,
        uncalibrated_input_tokens: int,
        cache_creation_input_tokens: int = 0,
        cache_read_input_tokens: int = 0,
        cached_input_tokens: int | None = None,
        estimated_cached_input_tokens: int | None = None,
        lock_token: str | None = None,
    ) -> m.UsageReport:
        """Report what the provider billed for a payload contextd assembled: calibrates
        the session's counts where they are estimates (`tokenizer_mode: "estimate"`).
        `input_tokens`: every input token of the call (OpenAI's `prompt_tokens`, or
        Anthropic's `input_tokens`, with its cache tokens given apart);
        `uncalibrated_input_tokens`: the payload's `usage.uncalibrated_input_tokens`.
        With `cached_input_tokens` (OpenAI's `prompt_tokens_details.cached_tokens`,
        Anthropic's `cache_read_input_tokens`) and `estimated_cached_input_tokens` (the
        payload's `usage.cached_input_tokens`), the provider's figure replaces the
        estimate in the session's bill (`stats.bill`)."""
        usage = dict(
            input_tokens=input_tokens,
            uncalibrated_input_tokens=uncalibrated_input_tokens,
            cache_creation_input_tokens=cache_creation_input_tokens,
            cache_read_input_tokens=cache_read_input_tokens,
            cached_input_tokens=cached_input_tokens,
            estimated_cached_input_tokens=estimated_cached_input_tokens,
            lock_token=lock_token,
        )
        return await self._send(_api.report_usage(session_id, usage))

    # compaction, events

    async def compact(
        self,
        session_id: str,
        *,
        wait: bool = False,
        force: bool = False,
        dry_run: bool = False,
        timeout_s: float | None = None,
        lock_token: str | None = None,
    ) -> m.CompactResult:
        """Request a compaction: `{job_id, status}`, or with `wait` the finished job
        (still active if the wait ran out). A waiting call reads as long as the server
        may wait, and a lost answer is looked up, not sent twice (`_compact.py`)."""
        options = dict(
            wait=wait, force=force, dry_run=dry_run, timeout_s=timeout_s, lock_token=lock_token
        )
        call = _api.compact(session_id, options)
        if call.idempotent:  # not a waiting compact: a retry is harmless
            return await self._send(call)
        before = finished_jobs(await self.compaction(session_id))
        attempt = 0
        while True:
            try:
                return await self._send(call)
            except ContextdError as exc:
                delay = self.retry.after_error(attempt, True) if answer_lost(exc) else None
                if delay is None:
                    raise
            await self._sleep(delay)
            attempt += 1
            done = job_finished_since(await self.compaction(session_id), before)
            if done is not None:
                return done

    async def compaction(self, session_id: str) -> m.CompactionState:
        return await self._send(_api.compaction(session_id))

    async def revert_compaction(
        self, session_id: str, job_id: str, *, lock_token: str | None = None
    ) -> m.RevertResult:
        """Undo the session's latest stored compaction (`job_id`, e.g. the state's
        `revertable_job_id`): the summary and watermark it replaced come back; the log is
        untouched. 409 `not_latest_compaction`, `not_revertable` or `already_reverted`
        otherwise. Not retried without an answer (`already_reverted` would answer it)."""
        return await self._send(_api.revert_compaction(session_id, job_id, lock_token))

    async def events(
        self,
        session_id: str,
        *,
        after_id: int | None = None,
        limit: int | None = None,
        type: str | None = None,
    ) -> m.EventPage:
        return await self._send(_api.events(session_id, after_id, limit, type))

    # leases

    async def claim_lease(self, session_id: str, owner: str, *, ttl_s: float = 30.0) -> m.Lease:
        return await self._send(_api.claim_lease(session_id, owner, ttl_s))

    async def renew_lease(
        self, session_id: str, lock_token: str, *, ttl_s: float = 30.0
    ) -> m.Lease:
        return await self._send(_api.renew_lease(session_id, lock_token, ttl_s))

    async def release_lease(self, session_id: str, lock_token: str) -> None:
        """Release the lease. Retried without an answer: a retry whose first attempt was
        applied answers `StaleLockToken`, which then means released."""
        await self._send(_api.release_lease(session_id, lock_token))

    @contextlib.asynccontextmanager
    async def lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float = 30.0,
        renew_every: float | None = None,
    ) -> AsyncIterator[HeldLease]:
        """Hold the session's writer lease for the block: claimed on entry (409
        `LockHeld` if another owner has it), renewed by a background task, released
        on exit. Leaving cancels a renewal in flight. A release that fails is logged
        (a warning on the `contextd_client` logger), not raised: the block's
        exception, or its success, stands, and the lease expires by its TTL."""
        held = HeldLease(session_id, await self.claim_lease(session_id, owner, ttl_s=ttl_s))

        def renew() -> Awaitable[m.Lease]:
            return self.renew_lease(session_id, held.lock_token, ttl_s=ttl_s)

        interval = renew_interval(ttl_s, renew_every)
        task = asyncio.create_task(
            renew_until_cancelled(held, renew, interval), name=f"contextd-lease-{session_id}"
        )
        try:
            yield held
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            with releasing(held):
                await self.release_lease(session_id, held.lock_token)

    # tokens, operations

    async def count_tokens(
        self,
        *,
        model: str | None = None,
        text: str | None = None,
        messages: Sequence[Mapping[str, Any]] | None = None,
        tools: list[dict[str, Any]] | None = None,
    ) -> m.TokenCount:
        listed = [dict(x) for x in messages] if messages is not None else None
        parts = dict(model=model, text=text, messages=listed, tools=tools)
        return await self._send(_api.count_tokens(parts))

    async def health(self) -> m.Health:
        return await self._send(_api.health())

    async def ready(self) -> m.Health:
        """`status` is "ready" or "not_ready" (database away, schema behind). A 503
        that is not contextd's (a gateway's) raises `ServiceUnavailable`."""
        return await self._send(_api.ready())


__all__ = ["AsyncContextdClient"]
