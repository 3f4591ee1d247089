"""Writer leases with fencing tokens (SPEC §2, §6)."""

from __future__ import annotations

import asyncio

import httpx

from tests.support.leases import claim
from tests.support.messages import log_of, user


async def test_claim_is_exclusive_and_names_the_holder(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={})
    lease = await claim(client, sid)
    assert set(lease) >= {"lock_token", "fencing_token", "expires_at"}
    r = await client.post(f"/sessions/{sid}/lock", json={"owner": "agent-b", "ttl_s": 30})
    assert r.status_code == 409
    assert r.json()["code"] == "lock_held" and r.json()["holder"] == "agent-a"
    s = (await client.get(f"/sessions/{sid}")).json()
    assert s["lease"]["owner"] == "agent-a"


async def test_writes_need_the_live_token(client: httpx.AsyncClient, sid: str) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("before")]})
    lease = await claim(client, sid)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("no token")]})
    assert r.status_code == 409 and r.json()["code"] == "lock_required"
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user("bad")], "lock_token": "forged"}
    )
    assert r.status_code == 409 and r.json()["code"] == "stale_lock_token"
    r = await client.put(f"/sessions/{sid}", json={"system_prompt": "hijack"})
    assert r.status_code == 409 and r.json()["code"] == "lock_required"
    r = await client.request("DELETE", f"/sessions/{sid}")
    assert r.status_code == 409
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("with token")], "lock_token": lease["lock_token"]},
    )
    assert r.status_code == 201
    assert [m["content"] for m in await log_of(client, sid)] == ["before", "with token"]


async def test_expired_lease_is_taken_over_and_old_token_goes_stale(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={})
    old = await claim(client, sid, "agent-a", ttl=0.2)
    await asyncio.sleep(0.3)
    # Without a live lease, plain writes are allowed again.
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("free")]})
    assert r.status_code == 201
    new = await claim(client, sid, "agent-b")
    assert new["fencing_token"] > old["fencing_token"]
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("late write")], "lock_token": old["lock_token"]},
    )
    assert r.status_code == 409 and r.json()["code"] == "stale_lock_token"
    r = await client.post(
        f"/sessions/{sid}/lock/renew", json={"lock_token": old["lock_token"], "ttl_s": 30}
    )
    assert r.status_code == 409 and r.json()["code"] == "stale_lock_token"
    assert [m["content"] for m in await log_of(client, sid)] == ["free"]


async def test_renew_and_release(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={})
    lease = await claim(client, sid, ttl=5)
    r = await client.post(
        f"/sessions/{sid}/lock/renew", json={"lock_token": lease["lock_token"], "ttl_s": 60}
    )
    assert r.status_code == 200
    assert r.json()["expires_at"] > lease["expires_at"]
    assert r.json()["fencing_token"] == lease["fencing_token"]
    r = await client.request("DELETE", f"/sessions/{sid}/lock", json={"lock_token": "wrong"})
    assert r.status_code == 409
    r = await client.request(
        "DELETE", f"/sessions/{sid}/lock", json={"lock_token": lease["lock_token"]}
    )
    assert r.status_code == 204
    again = await claim(client, sid, "agent-c")
    assert again["fencing_token"] == lease["fencing_token"] + 1
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("x")], "lock_token": lease["lock_token"]},
    )
    assert r.status_code == 409 and r.json()["code"] == "stale_lock_token"


async def test_concurrent_claims_have_one_winner(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={})
    results = await asyncio.gather(
        *(
            client.post(f"/sessions/{sid}/lock", json={"owner": f"w{i}", "ttl_s": 30})
            for i in range(8)
        )
    )
    codes = sorted(r.status_code for r in results)
    assert codes == [201] + [409] * 7


async def test_lock_on_missing_session_is_404(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 5})
    assert r.status_code == 404
    r = await client.post(f"/sessions/{sid}/lock", json={"owner": "", "ttl_s": -1})
    assert r.status_code == 422
    assert {e["loc"] for e in r.json()["errors"]} == {"owner", "ttl_s"}


async def test_tokens_and_owners_that_cannot_be_stored_are_422(
    client: httpx.AsyncClient, sid: str
) -> None:
    """Found by schemathesis: a NUL in a lock token used to reach PostgreSQL as a 500."""
    await client.put(f"/sessions/{sid}", json={})
    cases = [
        (
            "POST",
            f"/sessions/{sid}/lock/renew",
            {"lock_token": "z\u0000", "ttl_s": 5},
            "lock_token",
        ),
        ("DELETE", f"/sessions/{sid}/lock", {"lock_token": "z\u0000"}, "lock_token"),
        ("POST", f"/sessions/{sid}/lock", {"owner": "a\u0000b", "ttl_s": 5}, "owner"),
        (
            "POST",
            f"/sessions/{sid}/messages",
            {"messages": [{"role": "user", "content": "x"}], "lock_token": "\u0000"},
            "lock_token",
        ),
        ("POST", f"/sessions/{sid}/compact", {"lock_token": "\u0000"}, "lock_token"),
        ("PUT", f"/sessions/{sid}", {"lock_token": "\u0000"}, "lock_token"),
    ]
    for method, path, body, loc in cases:
        r = await client.request(method, path, json=body)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["errors"][0]["loc"] == loc
    r = await client.get(f"/sessions/{sid}/events", params={"type": "a\u0000"})
    assert r.status_code == 422
    r = await client.post(
        f"/sessions/{sid}/messages",
        content=b"\xff\xfe\x00",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["code"] == "validation_error"
