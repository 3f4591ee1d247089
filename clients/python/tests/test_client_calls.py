"""Headers, odd answers, a closed client, waiting compactions and the public models,
over `httpx.MockTransport` (no server)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import contextd_client
import httpx
import pytest
from contextd_client import (
    AsyncContextdClient,
    ClientClosed,
    ContextdClient,
    Decision,
    LeaseHolder,
    Retry,
    ServiceUnavailable,
    SessionStats,
    UsageReport,
)
from contextd_client import _models as models

Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, **kw: Any) -> ContextdClient:
    c = ContextdClient("http://contextd.test", transport=httpx.MockTransport(handler), **kw)
    c._sleep = lambda _: None
    return c


def test_an_authorization_header_is_sent_once_and_the_explicit_one_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONTEXTD_API_KEY", "k-env")
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok"})

    client(handler, headers={"Authorization": "Bearer k-header"}).health()
    client(handler, api_key="k-arg", headers={"AUTHORIZATION": "Bearer k-header"}).health()
    client(handler, headers={"Accept": "application/json", "X-Tenant": "t2"}).health()
    assert [r.headers.get_list("authorization") for r in seen] == [
        ["Bearer k-header"],
        ["Bearer k-header"],
        ["Bearer k-env"],
    ]
    assert seen[2].headers.get_list("accept") == ["application/json"]
    assert seen[2].headers["x-tenant"] == "t2"


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(503, json={"status": 503, "code": "unavailable", "detail": "gateway"}),
        httpx.Response(503, text="<html>Service Temporarily Unavailable</html>"),
        httpx.Response(503, json={"status": "draining"}),
    ],
)
def test_ready_raises_for_a_503_that_is_not_contextds_not_ready(answer: httpx.Response) -> None:
    with pytest.raises(ServiceUnavailable):
        client(lambda r: answer).ready()


def test_ready_answers_contextds_not_ready() -> None:
    body = {"status": "not_ready", "database": False, "schema": False, "error": "OSError"}
    health = client(lambda r: httpx.Response(503, json=body)).ready()
    assert health.status == "not_ready" and health.model_extra == {
        "database": False, "schema": False, "error": "OSError",
    }  # fmt: skip


async def test_a_closed_client_says_so() -> None:
    c = client(lambda r: httpx.Response(200, json={"status": "ok"}))
    with c:
        c.health()
    with pytest.raises(ClientClosed):
        c.health()
    handler = httpx.MockTransport(lambda r: httpx.Response(200, json={"status": "ok"}))
    async with AsyncContextdClient("http://x", transport=handler) as ac:
        await ac.health()
    with pytest.raises(ClientClosed):
        await ac.health()


class Jobs:
    """The compaction endpoints of one session. `lose` answers of the compact POST are
    lost after the server did its work; the first POST's job runs to `first_status`."""

    def __init__(self, lose: int, first_status: str, down: bool = False) -> None:
        self.jobs: list[dict[str, Any]] = [{"job_id": "old", "status": "success"}]
        self.lose = lose
        self.down = down
        self.first_status = first_status
        self.posts: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"last_compaction_seq": 3, "jobs": self.jobs})
        self.posts.append(request)
        if self.down:
            raise httpx.ConnectError("refused", request=request)
        active = [j for j in self.jobs if j["status"] in ("pending", "running")]
        if active:  # joins the running job, which then finishes
            job = active[0]
            job["status"] = "success"
        else:  # the server's noop guard: nothing to do right after a compaction
            job = {"job_id": f"j{len(self.posts)}", "status": self.first_status}
            self.first_status = "noop"
            self.jobs.insert(0, job)
        if self.lose > 0:
            self.lose -= 1
            raise httpx.ReadTimeout("no answer", request=request)
        return httpx.Response(200, json=job)


def test_a_waiting_compact_whose_answer_was_lost_reports_the_job_it_started() -> None:
    server = Jobs(lose=1, first_status="success")
    done = client(server).compact("s", wait=True)
    # Not sent again: that would start a second job, a noop, and report it instead.
    assert (done.job_id, done.status) == ("j1", "success") and len(server.posts) == 1
    assert [j["job_id"] for j in server.jobs] == ["j1", "old"]


def test_a_waiting_compact_whose_job_still_runs_is_sent_again_and_joins_it() -> None:
    server = Jobs(lose=1, first_status="running")
    done = client(server).compact("s", wait=True)
    assert (done.job_id, done.status) == ("j1", "success") and len(server.posts) == 2
    assert [j["job_id"] for j in server.jobs] == ["j1", "old"]


def test_a_waiting_compact_gives_up_after_its_retries() -> None:
    server = Jobs(lose=0, first_status="success", down=True)
    with pytest.raises(contextd_client.TransportError):
        client(server, retry=Retry(max_retries=2)).compact("s", wait=True)
    assert len(server.posts) == 3 and [j["job_id"] for j in server.jobs] == ["old"]


@pytest.mark.parametrize(
    ("options", "read"),
    [
        ({"wait": True, "timeout_s": 120.0}, 120.0),
        ({"wait": True}, 70.0),  # the server's default wait: compact_timeout_s * 2 + 10
        ({}, None),
    ],
)
def test_a_waiting_compact_reads_as_long_as_the_server_may_wait(
    options: dict[str, Any], read: float | None
) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.method == "GET":
            return httpx.Response(200, json={"jobs": []})
        return httpx.Response(200, json={"job_id": "j1", "status": "success"})

    client(handler, timeout=5.0).compact("s", **options)
    post = next(r for r in sent if r.method == "POST")
    timeout = post.extensions["timeout"]
    if read is None:
        assert timeout["read"] == 5.0
    else:
        assert timeout["read"] > read and timeout["connect"] == 5.0
    assert json.loads(post.content).get("timeout_s") == options.get("timeout_s")


async def test_the_async_client_finds_the_lost_compaction_the_same_way() -> None:
    server = Jobs(lose=1, first_status="success")
    transport = httpx.MockTransport(server)
    async with AsyncContextdClient("http://x", transport=transport) as c:
        done = await c.compact("s", wait=True, timeout_s=5)
    assert (done.job_id, done.status) == ("j1", "success") and len(server.posts) == 1


def test_every_result_model_is_public_and_typed() -> None:
    missing = set(models.__all__) - set(contextd_client.__all__)
    assert not missing
    assert {UsageReport, SessionStats, LeaseHolder, Decision} <= {
        getattr(contextd_client, n) for n in contextd_client.__all__
    }
    payload = models.Context.model_validate(
        {"usage": {"input_tokens": 3}, "decisions": [{"seq": 1, "action": "kept"}]}
    )
    assert payload.decisions == [Decision(seq=1, action="kept")]
    assert models.Context.model_validate({"usage": {"input_tokens": 3}}).decisions == []
    stats = SessionStats.model_validate({"token_calibration": {"factor": 1.2, "samples": 2}})
    assert stats.token_calibration == {"factor": 1.2, "samples": 2}
    assert "token_calibration" in SessionStats.model_fields
