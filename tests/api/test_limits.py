"""The OpenAPI description and the server agree on every bound (app/core/limits.py).

Each bound is read from `/openapi.json`, not from the code, and sent to the server
just inside (accepted) and just outside (a 422 naming the field, nothing written).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.limits import SESSION_ID_PATTERN
from tests.support.messages import user

LOCAL_MODEL = "bounds-test-model"  # no known context length: any context_limit is allowed


async def _openapi(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    spec: dict[str, Any] = r.json()
    return spec


def _plain(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional field's schema."""
    for branch in schema.get("anyOf", []):
        if branch.get("type") != "null":
            return dict(branch)
    return schema


def _bounds(schema: dict[str, Any]) -> dict[str, Any]:
    keys = ("minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "pattern", "enum")
    return {k: schema[k] for k in keys if k in schema}


def _query(spec: dict[str, Any], path: str, method: str, name: str) -> dict[str, Any]:
    for p in spec["paths"][path][method]["parameters"]:
        if p["name"] == name:
            return _plain(p["schema"])
    raise LookupError(name)


def _field(spec: dict[str, Any], model: str, name: str) -> dict[str, Any]:
    return _plain(spec["components"]["schemas"][model]["properties"][name])


async def _session(client: httpx.AsyncClient, sid: str, limit: int) -> None:
    r = await client.put(f"/sessions/{sid}", json={"model": LOCAL_MODEL, "context_limit": limit})
    assert r.status_code == 201, r.text
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("bounds")]})
    assert r.status_code == 201, r.text


def _refused(r: httpx.Response, field: str) -> None:
    assert r.status_code == 422, r.text
    assert field in [e["loc"] for e in r.json()["errors"]], r.text


async def test_context_token_bounds_are_the_described_ones(
    client: httpx.AsyncClient, sid: str
) -> None:
    spec = await _openapi(client)
    path = "/sessions/{session_id}/context"
    top = _query(spec, path, "get", "max_tokens")
    assert _bounds(_field(spec, "ContextIn", "max_tokens")) == _bounds(top)
    least, most = top["minimum"], top["maximum"]
    context_limit = _field(spec, "SessionSettingsIn", "context_limit")
    assert context_limit["maximum"] == most  # a session may allow the largest budget
    await _session(client, sid, most)
    url = f"/sessions/{sid}/context"
    for value in (least, most):
        r = await client.get(url, params={"max_tokens": value})
        assert r.status_code == 200, r.text
        r = await client.post(url, json={"max_tokens": value})
        assert r.status_code == 200, r.text
    for value in (least - 1, most + 1):
        _refused(await client.get(url, params={"max_tokens": value}), "max_tokens")
        _refused(await client.post(url, json={"max_tokens": value}), "max_tokens")

    reserve = _query(spec, path, "get", "reserve_output_tokens")
    assert _bounds(_field(spec, "ContextIn", "reserve_output_tokens")) == _bounds(reserve)
    r = await client.get(url, params={"max_tokens": most, "reserve_output_tokens": most - 1})
    assert r.status_code == 200, r.text
    r = await client.post(
        url, json={"max_tokens": 100, "reserve_output_tokens": reserve["minimum"]}
    )
    assert r.status_code == 200, r.text
    for value in (reserve["minimum"] - 1, reserve["maximum"] + 1):
        got = await client.get(url, params={"max_tokens": 100, "reserve_output_tokens": value})
        _refused(got, "reserve_output_tokens")
        got = await client.post(url, json={"max_tokens": 100, "reserve_output_tokens": value})
        _refused(got, "reserve_output_tokens")

    preview = _field(spec, "ContextIn", "preview_limit_tokens")
    for value in (preview["minimum"], preview["maximum"]):
        r = await client.post(url, json={"preview_limit_tokens": value})
        assert r.status_code == 200, r.text
    for value in (preview["minimum"] - 1, preview["maximum"] + 1):
        _refused(
            await client.post(url, json={"preview_limit_tokens": value}), "preview_limit_tokens"
        )


async def test_context_strings_and_enums_are_the_described_ones(
    client: httpx.AsyncClient, sid: str
) -> None:
    spec = await _openapi(client)
    path = "/sessions/{session_id}/context"
    await _session(client, sid, 100_000)
    url = f"/sessions/{sid}/context"
    prefix = _query(spec, path, "get", "previous_prefix_id")
    assert _bounds(_field(spec, "ContextIn", "previous_prefix_id")) == _bounds(prefix)
    longest = "p" * prefix["maxLength"]
    assert (await client.get(url, params={"previous_prefix_id": longest})).status_code == 200
    assert (await client.post(url, json={"previous_prefix_id": longest})).status_code == 200
    too_long = longest + "p"
    _refused(await client.get(url, params={"previous_prefix_id": too_long}), "previous_prefix_id")
    _refused(await client.post(url, json={"previous_prefix_id": too_long}), "previous_prefix_id")
    # Printable ASCII only (the described pattern), in the query and the body alike.
    _refused(await client.get(url, params={"previous_prefix_id": "é"}), "previous_prefix_id")
    _refused(await client.post(url, json={"previous_prefix_id": "é"}), "previous_prefix_id")

    for name in ("mode", "format"):
        described = _query(spec, path, "get", name)
        values = described.get("enum")
        if values is None:  # a $ref to the enum's schema
            ref = described["$ref"].rsplit("/", 1)[-1]
            values = spec["components"]["schemas"][ref]["enum"]
        assert _field(spec, "ContextIn", name).get("enum", values) == values
        for value in values:
            r = await client.get(url, params={name: value})
            assert r.status_code == 200, (name, value, r.text)
            r = await client.post(url, json={name: value})
            assert r.status_code == 200, (name, value, r.text)
        _refused(await client.get(url, params={name: values[0] + "x"}), name)
        _refused(await client.post(url, json={name: values[0] + "x"}), name)


@pytest.mark.parametrize("field", ["context_limit", "model"])
async def test_session_settings_bounds_are_the_described_ones(
    client: httpx.AsyncClient, sid: str, field: str
) -> None:
    spec = await _openapi(client)
    described = _field(spec, "SessionSettingsIn", field)
    if field == "context_limit":
        # Just above the minimum a session has no usable budget (a rule of its own).
        inside = [described["maximum"]]
        outside = [described["exclusiveMinimum"], described["maximum"] + 1]
        extra: dict[str, Any] = {"model": LOCAL_MODEL}
    else:
        inside = ["m" * described["minLength"], "m" * described["maxLength"]]
        outside = ["", "m" * (described["maxLength"] + 1)]
        extra = {}
    for i, value in enumerate(inside):
        r = await client.put(f"/sessions/{sid}-{i}", json={**extra, field: value})
        assert r.status_code == 201, r.text
    for i, value in enumerate(outside):
        r = await client.put(f"/sessions/{sid}-x{i}", json={**extra, field: value})
        _refused(r, field)
        assert (await client.get(f"/sessions/{sid}-x{i}")).status_code == 404  # nothing written


async def test_usage_report_bounds_are_the_described_ones(
    client: httpx.AsyncClient, sid: str
) -> None:
    spec = await _openapi(client)
    described = _field(spec, "UsageIn", "input_tokens")
    await _session(client, sid, 100_000)
    url = f"/sessions/{sid}/usage"
    r = await client.post(
        url, json={"input_tokens": described["maximum"], "uncalibrated_input_tokens": 10}
    )
    assert r.status_code == 200, r.text
    got = await client.post(
        url, json={"input_tokens": described["maximum"] + 1, "uncalibrated_input_tokens": 10}
    )
    _refused(got, "input_tokens")


async def test_session_id_bounds_are_the_described_ones(client: httpx.AsyncClient) -> None:
    spec = await _openapi(client)
    pattern = next(
        p["schema"]["pattern"]
        for p in spec["paths"]["/sessions/{session_id}/messages"]["post"]["parameters"]
        if p["name"] == "session_id"
    )
    assert pattern == SESSION_ID_PATTERN and "128}" in pattern
    longest = "s" * 128
    body = {"messages": [user("x")]}
    r = await client.post(f"/sessions/{longest}/messages", json=body)
    assert r.status_code in (200, 201), r.text
    _refused(await client.post(f"/sessions/{longest}s/messages", json=body), "session_id")
    _refused(await client.get(f"/sessions/{longest}s/context"), "session_id")
    assert (await client.get(f"/sessions/{longest}s")).status_code == 422
