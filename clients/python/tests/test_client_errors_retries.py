"""The client's error mapping and retry policy, over `httpx.MockTransport` (no server)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from contextd_client import (
    APIError,
    AsyncContextdClient,
    Conflict,
    ContextdClient,
    IdempotencyConflict,
    LockHeld,
    LockRequired,
    NotFound,
    PayloadTooLarge,
    Retry,
    ServiceUnavailable,
    StaleLockToken,
    TransportError,
    Unauthorized,
    ValidationFailed,
)

Handler = Callable[[httpx.Request], httpx.Response]
BUDGET = {
    "status": "ok", "current_tokens": 5, "usable_budget": 100, "warn_threshold": 80,
    "compact_threshold": 90, "context_limit": 200, "tokenizer_mode": "exact",
}  # fmt: skip


def problem(
    status: int, code: str, headers: dict[str, str] | None = None, **extra: object
) -> httpx.Response:
    body = {"type": "t", "title": "x", "status": status, "detail": f"{code} detail", "code": code}
    return httpx.Response(status, json={**body, **extra}, headers=headers)


def client(handler: Handler, retry: Retry | None = None) -> tuple[ContextdClient, list[float]]:
    c = ContextdClient("http://contextd.test", transport=httpx.MockTransport(handler), retry=retry)
    slept: list[float] = []
    c._sleep = slept.append
    return c, slept


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (422, "validation_error", ValidationFailed),
        (404, "not_found", NotFound),
        (401, "unauthorized", Unauthorized),
        (413, "payload_too_large", PayloadTooLarge),
        (409, "lock_held", LockHeld),
        (409, "lock_required", LockRequired),
        (409, "stale_lock_token", StaleLockToken),
        (409, "idempotency_conflict", IdempotencyConflict),
        (409, "compaction_failed", Conflict),
        (500, "internal_error", APIError),
        (503, "unavailable", ServiceUnavailable),
    ],
)
def test_each_problem_code_raises_its_class(status: int, code: str, cls: type[APIError]) -> None:
    c, _ = client(lambda r: problem(status, code), Retry(max_retries=0))
    with pytest.raises(cls) as err:
        c.get_session("s")
    assert type(err.value) is cls
    assert (err.value.status, err.value.code) == (status, code)
    assert err.value.detail == f"{code} detail"


def test_validation_failed_names_every_field() -> None:
    errors = [{"loc": "messages[3].tool_call_id", "msg": "is required"}, {"loc": "x", "msg": "y"}]
    c, _ = client(lambda r: problem(422, "validation_error", errors=errors))
    with pytest.raises(ValidationFailed) as err:
        c.append("s", [{"role": "tool", "content": "x"}])
    assert err.value.fields == ["messages[3].tool_call_id", "x"]
    assert err.value.errors[0].msg == "is required"


def test_lock_held_names_the_holder_and_conflicts_carry_their_details() -> None:
    c, _ = client(lambda r: problem(409, "lock_held", holder="worker-7"))
    with pytest.raises(LockHeld) as held:
        c.claim_lease("s", "me")
    assert held.value.holder == "worker-7"
    c, _ = client(lambda r: problem(409, "idempotency_conflict", seq=12))
    with pytest.raises(IdempotencyConflict) as dup:
        c.append("s", [{"role": "user", "content": "x", "id": "m1"}])
    assert dup.value.seq == 12


def test_a_body_that_is_not_a_problem_still_gives_the_status_class() -> None:
    c, _ = client(lambda r: httpx.Response(404, text="<html>nope</html>"))
    with pytest.raises(NotFound) as err:
        c.get_session("s")
    assert "nope" in err.value.detail
    # A code on the wrong status (a proxy reusing names) is not trusted.
    c, _ = client(lambda r: problem(400, "lock_held"))
    with pytest.raises(APIError) as other:
        c.get_session("s")
    assert type(other.value) is APIError


def test_503_is_retried_after_retry_after_and_the_ids_of_an_append_never_change() -> None:
    bodies: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        if len(bodies) < 3:
            return problem(503, "unavailable", headers={"Retry-After": "2"})
        sent: list[dict[str, str]] = bodies[-1]["messages"]  # type: ignore[assignment]
        acks = [{"id": m["id"], "seq": i + 1, "token_count": 3} for i, m in enumerate(sent)]
        return httpx.Response(201, json={"messages": acks, "budget": BUDGET})

    c, slept = client(handler)
    result = c.append("s", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert slept == [2.0, 2.0]
    ids = [[m["id"] for m in b["messages"]] for b in bodies]  # type: ignore[attr-defined]
    assert ids[0] == ids[1] == ids[2] and len(set(ids[0])) == 2
    assert [m.id for m in result.messages] == ids[0] and result.created


def test_retries_run_out_into_service_unavailable() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return problem(503, "unavailable", headers={"Retry-After": "1"})

    c, slept = client(handler, Retry(max_retries=2))
    with pytest.raises(ServiceUnavailable) as err:
        c.budget("s")
    assert len(calls) == 3 and slept == [1.0, 1.0]
    assert err.value.retry_after == 1.0


def test_a_retry_after_longer_than_allowed_is_not_waited_for() -> None:
    c, slept = client(
        lambda r: problem(503, "unavailable", headers={"Retry-After": "3600"}),
        Retry(max_retry_after=30),
    )
    with pytest.raises(ServiceUnavailable):
        c.budget("s")
    assert slept == []


def test_transport_errors_retry_idempotent_calls_only() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if len(seen) == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=BUDGET)

    c, slept = client(handler)
    assert c.budget("s").current_tokens == 5
    assert len(seen) == 2 and len(slept) == 1 and 0 < slept[0] <= 0.25

    def down(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        raise httpx.ReadError("reset", request=request)

    seen.clear()
    c, slept = client(down)
    with pytest.raises(TransportError) as err:
        c.claim_lease("s", "me")  # a second claim would meet the first one's lease
    assert seen == ["/sessions/s/lock"] and slept == []
    assert isinstance(err.value.__cause__, httpx.ReadError)
    seen.clear()
    with pytest.raises(TransportError):
        c.delete_tail("s", 3)  # a retry could delete what another writer appended
    assert len(seen) == 1


def test_backoff_grows_and_stays_under_its_cap() -> None:
    policy = Retry(backoff=1.0, max_backoff=4.0, max_retries=10)
    waits = [policy.after_error(n, idempotent=True) for n in range(6)]
    assert all(w is not None for w in waits)
    assert 0.5 <= waits[0] <= 1.0 and 2.0 <= waits[2] <= 4.0  # type: ignore[operator]
    assert all(w <= 4.0 for w in waits)  # type: ignore[operator]
    assert policy.after_error(10, idempotent=True) is None
    assert policy.after_error(0, idempotent=False) is None


def test_context_is_a_get_unless_per_call_parts_are_given() -> None:
    seen: list[httpx.Request] = []
    payload = {"messages": [], "tools": [], "usage": {"input_tokens": 1}}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=payload)

    c, _ = client(handler)
    c.context("s", max_tokens=500, format="anthropic")
    c.context("s", system="Be brief.", dynamic_context=["goal"])
    get, post = seen
    assert get.method == "GET" and dict(get.url.params) == {
        "max_tokens": "500",
        "format": "anthropic",
    }
    assert post.method == "POST" and json.loads(post.content) == {
        "system": "Be brief.", "dynamic_context": ["goal"],
    }  # fmt: skip


def test_the_api_key_and_the_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTD_URL", "http://from-env:9")
    monkeypatch.setenv("CONTEXTD_API_KEY", "k-env")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok"})

    ContextdClient(transport=httpx.MockTransport(handler)).health()
    ContextdClient(api_key="k-arg", transport=httpx.MockTransport(handler)).health()
    assert str(seen[0].url) == "http://from-env:9/healthz"
    assert [r.headers["authorization"] for r in seen] == ["Bearer k-env", "Bearer k-arg"]


async def test_the_async_client_retries_the_same_way() -> None:
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        if len(bodies) == 1:
            raise httpx.ReadTimeout("slow", request=request)
        ids = [m["id"] for m in json.loads(request.content)["messages"]]
        acks = [{"id": i, "seq": n + 1, "token_count": 1} for n, i in enumerate(ids)]
        return httpx.Response(200, json={"messages": acks, "budget": BUDGET})

    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)

    async with AsyncContextdClient("http://x", transport=httpx.MockTransport(handler)) as c:
        c._sleep = sleep
        result = await c.append("s", [{"role": "user", "content": "hi", "id": "mine"}])
    assert bodies[0] == bodies[1] and len(slept) == 1
    assert [m.id for m in result.messages] == ["mine"] and result.created is False


def test_retry_after_may_be_an_http_date() -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    when = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    answers = iter([problem(429, "rate_limited", headers={"Retry-After": when})])
    c, slept = client(lambda r: next(answers, httpx.Response(200, json=BUDGET)))
    assert c.budget("s").status == "ok"
    assert len(slept) == 1 and 3.0 <= slept[0] <= 5.0
