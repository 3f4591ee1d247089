"""`client.lease(...)`: claimed on entry, renewed while the block runs, released on exit."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from contextd_client import (
    AsyncContextdClient,
    ContextdClient,
    LockHeld,
    Retry,
    StaleLockToken,
)


class FakeLeases:
    """The lease endpoints of one session, as the server answers them."""

    def __init__(self, refuse_renewal_after: int | None = None) -> None:
        self.calls: list[tuple[str, str, dict[str, object]]] = []
        self.holder: str | None = None
        self.refuse_after = refuse_renewal_after
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        with self.lock:
            self.calls.append((request.method, request.url.path, body))
            renewals = sum(1 for c in self.calls if c[1].endswith("/renew"))
        lease = {"lock_token": "tok-1", "fencing_token": 7, "expires_at": "2030-01-01T00:00:00Z"}
        if request.url.path.endswith("/renew"):
            if self.refuse_after is not None and renewals > self.refuse_after:
                return problem(409, "stale_lock_token")
            return httpx.Response(200, json=lease)
        if request.method == "POST":
            if self.holder is not None:
                return problem(409, "lock_held", holder=self.holder)
            self.holder = str(body["owner"])
            return httpx.Response(201, json={**lease, "owner": self.holder})
        self.holder = None
        return httpx.Response(204)

    def kinds(self) -> list[str]:
        return [
            "renew" if p.endswith("/renew") else ("claim" if m == "POST" else "release")
            for m, p, _ in self.calls
        ]


def problem(status: int, code: str, **extra: object) -> httpx.Response:
    return httpx.Response(status, json={"status": status, "code": code, "detail": code, **extra})


def test_a_lease_is_renewed_while_held_and_released_after() -> None:
    server = FakeLeases()
    with (
        ContextdClient("http://x", transport=httpx.MockTransport(server)) as c,
        c.lease("s1", "worker-1", ttl_s=5, renew_every=0.05) as held,
    ):
        assert held.lock_token == "tok-1" and held.fencing_token == 7
        deadline = time.monotonic() + 5
        while held.renewals < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    kinds = server.kinds()
    assert kinds[0] == "claim" and kinds[-1] == "release" and kinds.count("renew") >= 2
    assert server.calls[0][2] == {"owner": "worker-1", "ttl_s": 5}
    assert all(body == {"lock_token": "tok-1"} for m, _, body in server.calls if m == "DELETE")
    assert server.holder is None


def test_a_held_session_raises_lock_held_and_releases_nothing() -> None:
    server = FakeLeases()
    server.holder = "someone-else"
    with ContextdClient("http://x", transport=httpx.MockTransport(server)) as c:
        with pytest.raises(LockHeld) as err, c.lease("s1", "me"):
            pass
    assert err.value.holder == "someone-else"
    assert server.kinds() == ["claim"]


async def test_an_async_lease_that_loses_its_renewal_says_so() -> None:
    server = FakeLeases(refuse_renewal_after=1)
    async with AsyncContextdClient("http://x", transport=httpx.MockTransport(server)) as c:
        async with c.lease("s1", "worker-1", ttl_s=5, renew_every=0.02) as held:
            for _ in range(1000):  # 10 s at most, on a loaded machine
                if held.lost is not None:
                    break
                await asyncio.sleep(0.01)
            assert isinstance(held.lost, StaleLockToken) and held.renewals == 1
    assert server.kinds()[0] == "claim" and server.kinds()[-1] == "release"


def release_fails(server: FakeLeases) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            raise httpx.ConnectError("refused", request=request)
        return server(request)

    return httpx.MockTransport(handler)


def test_a_failed_release_neither_masks_nor_fails_the_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = ContextdClient("http://x", transport=release_fails(FakeLeases()))
    c._sleep = lambda _: None
    with pytest.raises(ValueError, match="the block's own error"), c.lease("s1", "w"):
        raise ValueError("the block's own error")
    c = ContextdClient("http://x", transport=release_fails(FakeLeases()))
    c._sleep = lambda _: None
    with c.lease("s1", "w") as held:
        pass  # a block that succeeded stays a success: the lease runs out by its TTL
    assert held.lost is None
    warned = [r for r in caplog.records if r.name == "contextd_client"]
    assert [r.levelname for r in warned] == ["WARNING", "WARNING"]
    assert "s1" in warned[0].getMessage() and "TransportError" in warned[0].getMessage()


async def test_a_failed_async_release_neither_masks_nor_fails_the_block(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def no_sleep(_: float) -> None:
        return None

    async with AsyncContextdClient("http://x", transport=release_fails(FakeLeases())) as c:
        c._sleep = no_sleep
        with pytest.raises(ValueError, match="the block's own error"):
            async with c.lease("s1", "w"):
                raise ValueError("the block's own error")
    async with AsyncContextdClient("http://x", transport=release_fails(FakeLeases())) as c:
        c._sleep = no_sleep
        async with c.lease("s1", "w"):
            pass
    warned = [r for r in caplog.records if r.name == "contextd_client"]
    assert [r.levelname for r in warned] == ["WARNING", "WARNING"]


def test_leaving_a_lease_does_not_wait_out_a_renewal_stuck_in_its_retries() -> None:
    server = FakeLeases()
    renewing = threading.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/renew"):
            renewing.set()
            time.sleep(0.2)
            raise httpx.ReadTimeout("no answer", request=request)
        return server(request)

    retry = Retry(max_retries=3, backoff=2.0, max_backoff=2.0)  # ~4 s of retries
    with ContextdClient("http://x", transport=httpx.MockTransport(handler), retry=retry) as c:
        with c.lease("s1", "w", ttl_s=30, renew_every=0.01) as held:
            assert renewing.wait(5)
            left_at = time.monotonic()
        took = time.monotonic() - left_at
    assert took < 1.0, took
    assert server.kinds() == ["claim", "release"] and held.lost is None
