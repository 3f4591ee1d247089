"""The log's routes: a page of it, one message, the tail deleted, the log cleared.

`POST /sessions/{id}/messages`, the append, is here only as the OpenAPI description
shows it: its lane (app/api/append_lane.py) answers every append ahead of the router,
with app/messages/service.py's `append_request`; this route is never called.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Path, Query, Response

from app.api.deps import (
    After,
    BeforeSeq,
    DatabaseDep,
    PageLimit,
    SessionId,
    SettingsDep,
    TenantDep,
    encoded,
)
from app.api.lanes import AnsweredByLane
from app.api.models.requests import AppendIn
from app.api.models.responses import AppendOut, Cleared, DeletedTail, MessageOut, MessagePage
from app.api.openapi import answers, request_body
from app.core.errors import invalid
from app.core.jsonsafe import StoredStr
from app.core.limits import BIGINT_MAX, LOCK_TOKEN_MAX, SEQS_MAX_CHARS
from app.messages import ranges, tail
from app.sessions.schemas import LockTokenIn
from app.sessions.service import get_session

router = APIRouter(tags=["messages"])


@router.post(
    "/sessions/{session_id}/messages",
    status_code=201,
    summary="Append 1..N messages atomically",
    openapi_extra=request_body(AppendIn),
    responses=answers(
        {
            201: (AppendOut, "stored: each message's seq and the session's budget"),
            200: (AppendOut, "every message was a replay of an earlier id"),
        }
    ),
)
async def append_messages(
    session_id: SessionId,
    # The schema in the docs is AppendIn's; the lane reads the body as JSON and
    # validates it by hand (errors name the field, e.g. messages[2].tool_call_id).
    body: Annotated[dict[str, Any], Body()],
) -> Response:
    """Messages are OpenAI chat messages with optional contextd flags inline
    (`id`, `pinned`, `include_in_context`, `mode`, `run_id`, `metadata`, `error`).
    Unknown fields are stored verbatim. A message whose `id` was stored before is
    not stored again: its original seq is returned."""
    # Never called: app/api/append_lane.py answers every append, ahead of the router.
    raise AnsweredByLane(session_id)


@router.get(
    "/sessions/{session_id}/messages",
    summary="The raw log, paginated by seq; a range or a summary's citation read back",
    responses=answers({200: (MessagePage, "one page of the log")}),
)
async def list_messages(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    limit: PageLimit,
    after_seq: After = 0,
    order: Annotated[
        Literal["asc", "desc"],
        Query(description="`desc` reads the tail first: the newest `limit` messages"),
    ] = "asc",
    before_seq: BeforeSeq = None,
    from_seq: Annotated[
        int | None, Query(ge=1, le=BIGINT_MAX, description="only messages from this seq on")
    ] = None,
    to_seq: Annotated[
        int | None, Query(ge=1, le=BIGINT_MAX, description="only messages up to this seq")
    ] = None,
    seqs: Annotated[
        str | None,
        Query(
            max_length=SEQS_MAX_CHARS,
            description='only these seqs, as a summary item cites them: "412-431" or "3,7-9"',
        ),
    ] = None,
    max_chars: Annotated[
        int | None,
        Query(ge=1, le=BIGINT_MAX, description="at most this many characters of text in all"),
    ] = None,
) -> dict[str, Any]:
    """Compacted messages are included: compaction never deletes the log.

    `after_seq < seq < before_seq`, `limit` at a time. In `asc` order (the
    default) page on with `after_seq=next_after_seq`; in `desc` order the
    messages come newest first and the next (older) page is
    `before_seq=next_before_seq`. The last `n` messages of a session are
    `?order=desc&limit=n`, one request however long the log.

    A range reads back what a summary item cites (`[#412-431]`, SPEC §5): `from_seq`
    and `to_seq` (inclusive), or `seqs` as the summary writes it (`412-431`,
    `3,7-9`; brackets and `#` may stay). With `seqs`, `next_seqs` is what of them
    the page did not reach (`seqs=next_seqs` reads on). `max_chars` holds the
    page's text (`content`) to that many characters: short messages come whole, long
    ones are cut to an equal share, their `range` naming the characters kept
    (`GET …/messages/{seq}` reads one whole). A malformed `seqs`, or `to_seq`
    below `from_seq`, is a 422 naming it."""
    async with db.transaction() as s:
        row = await get_session(s, tenant, session_id)
        page = await ranges.read(
            s,
            tenant,
            row,
            limit=limit,
            after_seq=after_seq,
            before_seq=before_seq,
            from_seq=from_seq,
            to_seq=to_seq,
            seqs=seqs,
            descending=order == "desc",
            max_chars=max_chars,
        )
    return encoded(page.as_dict())


@router.delete(
    "/sessions/{session_id}/messages",
    summary="Delete the tail of the log (seq >= from_seq)",
    responses={
        **answers({200: (DeletedTail, "what was deleted, the new last_seq and budget")}),
        409: {"description": "`below_watermark`, or the lease refuses the write"},
    },
)
async def delete_messages(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    from_seq: Annotated[int, Query(ge=1, le=BIGINT_MAX, description="first seq to delete")],
    lock_token: Annotated[
        StoredStr | None,
        Query(max_length=LOCK_TOKEN_MAX, description="the live lease's token (or in the body)"),
    ] = None,
    body: Annotated[LockTokenIn | None, Body()] = None,
) -> dict[str, Any]:
    """Removes every message with `seq >= from_seq` in one transaction (an agent
    undoing its last step: `pop_item`). Later appends reuse the freed seqs.

    Fenced like an append: while a lease is live, send its `lock_token` as a query
    parameter or in a JSON body (`{"lock_token": ...}`, as `DELETE /sessions/{id}`
    takes it). Only the effective history can be cut: a `from_seq` at or below the
    compaction watermark is a 409 `below_watermark`. A `from_seq` past the end deletes
    nothing. Tool calls whose answer was deleted are open again; call ids and message
    ids of deleted messages may be used again. A compaction running meanwhile stores
    nothing. The answer carries the deleted messages in log order, the session's new
    `last_seq` and its budget; a `messages.deleted` event records the cut."""
    token = _one_token(lock_token, body)
    async with db.transaction() as s:
        cut = await tail.delete_tail(s, tenant, session_id, from_seq, token, settings)
    return encoded(
        {
            "deleted_count": cut.deleted_count,
            "messages": cut.deleted,
            "last_seq": cut.last_seq,
            "budget": cut.budget.as_dict(),
        }
    )


@router.post(
    "/sessions/{session_id}/clear",
    summary="Empty the log, summary and watermark; keep the settings",
    responses=answers({200: (Cleared, "how many messages went; the budget now")}),
)
async def clear_session(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    body: Annotated[LockTokenIn | None, Body()] = None,
) -> dict[str, Any]:
    """Deletes every message, the rolling summary, the memory-flush candidates and
    the watermark in one transaction; settings (model, system prompt, tools,
    anchors, compaction overrides, metadata), the lease and the event log stay.
    The next append gets seq 1. Fenced like an append (`lock_token` in the body).
    A compaction running meanwhile stores nothing. A `session.cleared` event
    records it."""
    async with db.transaction() as s:
        cut = await tail.clear(s, tenant, session_id, body.lock_token if body else None, settings)
    return encoded(
        {"deleted_count": cut.deleted_count, "last_seq": 0, "budget": cut.budget.as_dict()}
    )


def _one_token(query: str | None, body: LockTokenIn | None) -> str | None:
    in_body = body.lock_token if body else None
    if query is not None and in_body is not None and query != in_body:
        raise invalid("lock_token", "given in the query and the body with different values")
    return query if query is not None else in_body


@router.get(
    "/sessions/{session_id}/messages/{seq}",
    summary="One message in full, or a range of it",
    responses=answers({200: (MessageOut, "the message, or the asked range of its text")}),
)
async def get_message(
    session_id: SessionId,
    seq: Annotated[int, Path(ge=1, le=BIGINT_MAX)],
    db: DatabaseDep,
    tenant: TenantDep,
    char_start: Annotated[int | None, Query(ge=0)] = None,
    char_end: Annotated[int | None, Query(ge=0)] = None,
    line_start: Annotated[int | None, Query(ge=1)] = None,
    line_end: Annotated[int | None, Query(ge=1)] = None,
) -> dict[str, Any]:
    """The target of tool-output previews. With `char_start`/`char_end` (0-based,
    end exclusive) or `line_start`/`line_end` (1-based, inclusive), `content` is
    that slice of the message's text and `range` says where it sits in the whole,
    so an agent can read a large output in pieces; a start past the message's end is a
    422 naming it and the message's length."""
    out = await ranges.read_one(
        db,
        tenant,
        session_id,
        seq,
        char_start=char_start,
        char_end=char_end,
        line_start=line_start,
        line_end=line_end,
    )
    return encoded(out)
