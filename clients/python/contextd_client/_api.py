"""Every contextd call as data: method, path, body, whether it may be sent twice, how
to read its answer. `ContextdClient` and `AsyncContextdClient` only send these, so
the two clients cannot drift apart."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypedDict, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from contextd_client import _models as m
from contextd_client._compact import read_timeout
from contextd_client._exceptions import error_from_response

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Format = Literal["openai", "responses", "anthropic"]
Order = Literal["asc", "desc"]


class SessionSettings(TypedDict, total=False):
    """Fields of `PUT /sessions/{id}`: left out keeps the stored value, None resets it."""

    model: str | None
    context_limit: int | None
    system_prompt: str | None
    tools: list[dict[str, Any]] | None
    strategy: str | None
    anchors: list[str] | None
    auto_compact: bool | None
    recall: bool | None
    compaction: dict[str, Any] | None
    metadata: dict[str, Any] | None
    lock_token: str | None


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    body: Any = None
    has_body: bool = False
    # Safe to send twice: retried after a transport error or a gateway's 502/504.
    idempotent: bool = False
    # Statuses besides 2xx that are answers, not errors (readyz's 503 "not ready").
    answers: frozenset[int] = field(default_factory=frozenset)
    retried: bool = True
    # The server holds the answer back this long on purpose: the read waits for it.
    read_timeout: float | None = None


def new_message_id() -> str:
    """A fresh message id; contextd stores a message once per id."""
    return uuid.uuid4().hex


def with_ids(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `messages`, each with an `id` (kept if it has one, else a new one).

    Ids are assigned here, once, before the first attempt: every retry of the same
    append carries the same ids, so the server stores each message once.
    """
    out = []
    for message in messages:
        copy = dict(message)
        if not copy.get("id"):
            copy["id"] = new_message_id()
        out.append(copy)
    return out


def _sid(session_id: str) -> str:
    # "." and ".." are valid ids; percent-encoded they are not read as dot segments.
    if set(session_id) == {"."}:
        return session_id.replace(".", "%2E")
    return quote(session_id, safe="")


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda r: cls.model_validate(r.json())


def _nothing(_: httpx.Response) -> None:
    return None


def _params(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _body(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _call(method: str, path: str, parse: Callable[[httpx.Response], T], **kw: Any) -> Call[T]:
    if "body" in kw:
        kw["has_body"] = True
    return Call(method, path, parse, **kw)


# sessions ---------------------------------------------------------------------------


def put_session(session_id: str, settings: SessionSettings) -> Call[m.Session]:
    return _call(
        "PUT", f"/sessions/{_sid(session_id)}", _model(m.Session), body=dict(settings),
        idempotent=True,
    )  # fmt: skip


def get_session(session_id: str) -> Call[m.Session]:
    return _call("GET", f"/sessions/{_sid(session_id)}", _model(m.Session), idempotent=True)


def list_sessions(limit: int | None, cursor: str | None) -> Call[m.SessionPage]:
    params = _params(limit=limit, cursor=cursor)
    return _call("GET", "/sessions", _model(m.SessionPage), params=params, idempotent=True)


def delete_session(session_id: str, lock_token: str | None) -> Call[None]:
    body = _body(lock_token=lock_token) or None
    return _call("DELETE", f"/sessions/{_sid(session_id)}", _nothing, body=body)


# messages ---------------------------------------------------------------------------


def _appended(r: httpx.Response) -> m.AppendResult:
    return m.AppendResult.model_validate({**r.json(), "created": r.status_code == 201})


def append(
    session_id: str, messages: Sequence[Mapping[str, Any]], lock_token: str | None
) -> Call[m.AppendResult]:
    body = _body(messages=with_ids(messages), lock_token=lock_token)
    path = f"/sessions/{_sid(session_id)}/messages"
    return _call("POST", path, _appended, body=body, idempotent=True)


def messages(
    session_id: str,
    order: Order,
    after_seq: int | None,
    before_seq: int | None,
    limit: int | None,
    span: Mapping[str, Any] | None = None,
) -> Call[m.MessagePage]:
    params = _params(
        order=None if order == "asc" else order,
        after_seq=after_seq,
        before_seq=before_seq,
        limit=limit,
        **(span or {}),
    )
    path = f"/sessions/{_sid(session_id)}/messages"
    return _call("GET", path, _model(m.MessagePage), params=params, idempotent=True)


def message(
    session_id: str, seq: int, ranges: Mapping[str, int | None] | None = None
) -> Call[m.Message]:
    params = _params(**(ranges or {}))
    path = f"/sessions/{_sid(session_id)}/messages/{seq}"
    return _call("GET", path, _model(m.Message), params=params, idempotent=True)


def search(
    session_id: str,
    q: str,
    limit: int | None,
    before_seq: int | None,
    roles: Sequence[str] | None,
) -> Call[m.SearchResult]:
    params = _params(
        q=q, limit=limit, before_seq=before_seq, roles=",".join(roles) if roles else None
    )
    path = f"/sessions/{_sid(session_id)}/search"
    return _call("GET", path, _model(m.SearchResult), params=params, idempotent=True)


def delete_tail(session_id: str, from_seq: int, lock_token: str | None) -> Call[m.TailDeleteResult]:
    # Not retried without an answer: between two attempts another writer may have
    # appended above from_seq, and the second attempt would delete that too.
    body = _body(lock_token=lock_token) or None
    path = f"/sessions/{_sid(session_id)}/messages"
    return _call(
        "DELETE", path, _model(m.TailDeleteResult), params={"from_seq": from_seq}, body=body
    )


def clear(session_id: str, lock_token: str | None) -> Call[m.ClearResult]:
    body = _body(lock_token=lock_token)
    return _call("POST", f"/sessions/{_sid(session_id)}/clear", _model(m.ClearResult), body=body)


# context and budget -------------------------------------------------------------------


QUERY_PARAMS = (
    "max_tokens",
    "strategy",
    "mode",
    "format",
    "reserve_output_tokens",
    "preview_limit_tokens",
    "recall",
)
MAX_QUERY_PREFIX_ID = 2048


def context(session_id: str, parts: Mapping[str, Any]) -> Call[m.Context]:
    """GET with only query parameters; POST when per-call parts are given."""
    given = {k: v for k, v in parts.items() if v is not None}
    path = f"/sessions/{_sid(session_id)}/context"
    # A prefix_id grows with the payload's head; a long one goes in a body, not a URL.
    short_echo = len(given.get("previous_prefix_id", "")) <= MAX_QUERY_PREFIX_ID
    if short_echo and given.keys() <= {*QUERY_PARAMS, "previous_prefix_id"}:
        return _call("GET", path, _model(m.Context), params=given, idempotent=True)
    return _call("POST", path, _model(m.Context), body=given, idempotent=True)


def budget(session_id: str) -> Call[m.Budget]:
    return _call("GET", f"/sessions/{_sid(session_id)}/budget", _model(m.Budget), idempotent=True)


def preview_budget(session_id: str, messages: Sequence[Mapping[str, Any]]) -> Call[m.BudgetPreview]:
    path = f"/sessions/{_sid(session_id)}/budget"
    body = {"messages": [dict(x) for x in messages]}
    return _call("POST", path, _model(m.BudgetPreview), body=body, idempotent=True)


def report_usage(session_id: str, usage: Mapping[str, Any]) -> Call[m.UsageReport]:
    body = {k: v for k, v in usage.items() if v is not None}
    path = f"/sessions/{_sid(session_id)}/usage"
    # Not idempotent: a report sent twice weighs twice in the calibration.
    return _call("POST", path, _model(m.UsageReport), body=body)


# compaction and events ---------------------------------------------------------------


def compact(session_id: str, options: Mapping[str, Any]) -> Call[m.CompactResult]:
    body = {k: v for k, v in options.items() if v is not None and v is not False}
    path = f"/sessions/{_sid(session_id)}/compact"
    if body.get("wait") and not body.get("dry_run"):
        # Sent again only by the clients' `compact`, after finding its job (_compact.py):
        # a plain second request could answer another job's outcome as this one's.
        wait = read_timeout(body.get("timeout_s"))
        return _call("POST", path, _model(m.CompactResult), body=body, read_timeout=wait)
    # A retried request joins the running job or starts a harmless noop: safe twice.
    return _call("POST", path, _model(m.CompactResult), body=body, idempotent=True)


def compaction(session_id: str) -> Call[m.CompactionState]:
    path = f"/sessions/{_sid(session_id)}/compaction"
    return _call("GET", path, _model(m.CompactionState), idempotent=True)


def revert_compaction(session_id: str, job_id: str, lock_token: str | None) -> Call[m.RevertResult]:
    # Not retried without an answer: it names its job, so a second attempt cannot undo
    # another one, but it would answer 409 `already_reverted` for the first one's work.
    body = _body(lock_token=lock_token)
    path = f"/sessions/{_sid(session_id)}/compaction/{quote(job_id, safe='')}/revert"
    return _call("POST", path, _model(m.RevertResult), body=body)


def events(
    session_id: str, after_id: int | None, limit: int | None, type: str | None
) -> Call[m.EventPage]:
    params = _params(after_id=after_id, limit=limit, type=type)
    path = f"/sessions/{_sid(session_id)}/events"
    return _call("GET", path, _model(m.EventPage), params=params, idempotent=True)


# leases -----------------------------------------------------------------------------


def claim_lease(session_id: str, owner: str, ttl_s: float) -> Call[m.Lease]:
    # Not idempotent: a second claim meets the first one's lease (409 lock_held).
    body = {"owner": owner, "ttl_s": ttl_s}
    return _call("POST", f"/sessions/{_sid(session_id)}/lock", _model(m.Lease), body=body)


def renew_lease(session_id: str, lock_token: str, ttl_s: float) -> Call[m.Lease]:
    body = {"lock_token": lock_token, "ttl_s": ttl_s}
    path = f"/sessions/{_sid(session_id)}/lock/renew"
    return _call("POST", path, _model(m.Lease), body=body, idempotent=True)


def release_lease(session_id: str, lock_token: str) -> Call[None]:
    # Safe twice: a second release changes nothing and answers 409 stale_lock_token
    # (404 if the session is gone), which says the token holds no lease any more.
    body = {"lock_token": lock_token}
    path = f"/sessions/{_sid(session_id)}/lock"
    return _call("DELETE", path, _nothing, body=body, idempotent=True)


# tokens and operations ----------------------------------------------------------------


def count_tokens(parts: Mapping[str, Any]) -> Call[m.TokenCount]:
    body = {k: v for k, v in parts.items() if v is not None}
    return _call("POST", "/tokens/count", _model(m.TokenCount), body=body, idempotent=True)


def health() -> Call[m.Health]:
    return _call("GET", "/healthz", _model(m.Health), idempotent=True)


def _readiness(r: httpx.Response) -> m.Health:
    if r.status_code == 503:
        # Only contextd's own "not ready" body is an answer: a gateway's or a load
        # balancer's 503 in front of it is the error any other call would raise.
        try:
            body = r.json()
        except ValueError:
            body = None
        if not (isinstance(body, dict) and body.get("status") == "not_ready"):
            raise error_from_response(r)
    return m.Health.model_validate(r.json())


def ready() -> Call[m.Health]:
    # "not ready" is an answer, not an error, and asking again is the caller's choice.
    return _call(
        "GET", "/readyz", _readiness, idempotent=True, answers=frozenset({503}), retried=False
    )
