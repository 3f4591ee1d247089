"""The OpenAPI description is typed (issue 10 item 2), and real answers fit it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter

from app.api.models import compaction as compaction_answers
from app.api.models import problem as problem_model
from app.api.models import requests as schemas
from app.api.models import responses as answers
from app.core.settings import load_settings
from tests.support.apps import app_client
from tests.support.messages import call, result, user

# Probes and metrics are for orchestrators, not API clients: /metrics is text.
UNTYPED_OK = {"operations"}


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    name = ref.removeprefix("#/components/schemas/")
    assert ref.startswith("#/components/schemas/") and name in spec["components"]["schemas"], ref
    return dict(spec["components"]["schemas"][name])


def _concrete(spec: dict[str, Any], schema: dict[str, Any], where: str) -> None:
    """A named object with declared properties (or a union of such), not `{}`/Any/dict."""
    schema = {k: v for k, v in schema.items() if k not in ("title", "description")}
    variants = schema.get("anyOf") or schema.get("oneOf")
    if variants:
        typed = [v for v in variants if v != {"type": "null"}]
        assert typed, f"{where}: only null"
        for v in typed:
            _concrete(spec, v, where)
        return
    assert "$ref" in schema, f"{where}: not a named model: {schema}"
    target = _resolve(spec, schema)
    assert target.get("type") == "object" and target.get("properties"), f"{where}: {target}"


async def test_every_operation_has_typed_bodies_and_answers(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    checked = 0
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if set(op.get("tags", [])) & UNTYPED_OK:
                continue
            where = f"{method.upper()} {path}"
            if "requestBody" in op:
                content = op["requestBody"]["content"]
                assert list(content) == ["application/json"], where
                _concrete(spec, content["application/json"]["schema"], where + " body")
            ok = {s: r for s, r in op["responses"].items() if s.startswith("2")}
            assert ok, where
            for status, answer in ok.items():
                if status == "204":
                    assert not answer.get("content"), where
                    continue
                _concrete(
                    spec, answer["content"]["application/json"]["schema"], f"{where} {status}"
                )
            for status in ("404", "422"):
                problem = op["responses"][status]["content"]["application/problem+json"]["schema"]
                assert problem == {"$ref": "#/components/schemas/Problem"}, where
            checked += 1
    assert checked >= 20


async def test_messages_are_a_union_by_role_that_keeps_unknown_fields(
    client: httpx.AsyncClient,
) -> None:
    spec = (await client.get("/openapi.json")).json()
    parts = spec["components"]["schemas"]
    items = parts["AppendIn"]["properties"]["messages"]["items"]
    assert items["discriminator"]["propertyName"] == "role"
    assert set(items["discriminator"]["mapping"]) == {"system", "user", "assistant", "tool"}
    for name in ("SystemMessage", "UserMessage", "AssistantMessage", "ToolMessage"):
        assert parts[name]["additionalProperties"] is True, name
    assert parts["ToolMessage"]["required"] == ["role", "tool_call_id", "content"]
    assert parts["AppendIn"]["examples"] and parts["Problem"]["examples"]


def _fits(model: Any, body: Any) -> None:
    TypeAdapter(model).validate_python(body)


@pytest.fixture
async def runner_client(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    # Its own runner (extractive summaries, no model), so a compaction waited for
    # finishes instead of waiting out its timeout on the suite's runner-less app.
    settings = load_settings(database_url=None, run_compactions_in_process=True)
    async with app_client(settings, make_database()) as c:
        yield c


async def test_real_answers_fit_their_models(runner_client: httpx.AsyncClient, sid: str) -> None:
    client = runner_client
    base = f"/sessions/{sid}"
    r = await client.put(base, json={"system_prompt": "Be brief.", "anchors": ["cap 4 EUR"]})
    _fits(answers.Session, r.json())
    msgs = [
        {**user("read a.py"), "id": "u-1", "x_trace": {"span": 7}},
        call("c1", args='{"path": "a.py"}'),
        result("c1", "line one\nline two"),
        {"role": "assistant", "content": "done"},
    ]
    r = await client.post(f"{base}/messages", json={"messages": msgs})
    assert r.status_code == 201
    _fits(answers.AppendOut, r.json())
    page = (await client.get(f"{base}/messages")).json()
    _fits(answers.MessagePage, page)
    assert page["messages"][0]["x_trace"] == {"span": 7}  # unknown fields kept verbatim
    _fits(answers.MessageOut, (await client.get(f"{base}/messages/3?line_start=2")).json())
    _fits(answers.Budget, (await client.get(f"{base}/budget")).json())
    preview = await client.post(f"{base}/budget", json={"messages": [user("more")]})
    _fits(answers.BudgetPreview, preview.json())
    for fmt in ("openai", "responses", "anthropic"):
        _fits(answers.ContextPayload, (await client.get(f"{base}/context?format={fmt}")).json())
    ctx = await client.post(
        f"{base}/context", json={"dynamic_context": ["goal"], "max_tokens": 900}
    )
    _fits(answers.ContextPayload, ctx.json())
    dry = await client.post(f"{base}/compact", json={"dry_run": True})
    _fits(compaction_answers.CompactionDryRun, dry.json())
    done = await client.post(f"{base}/compact", json={"wait": True, "force": True})
    assert done.json()["status"] in ("success", "degraded", "noop"), done.text
    _fits(compaction_answers.CompactionJob, done.json())
    _fits(compaction_answers.CompactionState, (await client.get(f"{base}/compaction")).json())
    _fits(answers.EventPage, (await client.get(f"{base}/events")).json())
    _fits(answers.SessionPage, (await client.get("/sessions?limit=2")).json())
    lease = (await client.post(f"{base}/lock", json={"owner": "me"})).json()
    _fits(answers.Lease, lease)
    token = lease["lock_token"]
    renewed = await client.post(f"{base}/lock/renew", json={"lock_token": token})
    _fits(answers.Lease, renewed.json())
    cut = await client.delete(f"{base}/messages?from_seq=4&lock_token={token}")
    _fits(answers.DeletedTail, cut.json())
    cleared = await client.post(f"{base}/clear", json={"lock_token": token})
    _fits(answers.Cleared, cleared.json())
    count = await client.post("/tokens/count", json={"text": "hello"})
    _fits(answers.TokenCount, count.json())
    missing = await client.get("/sessions/no-such-session")
    assert missing.status_code == 404
    _fits(problem_model.Problem, missing.json())
    bad = await client.post(f"{base}/messages", json={"messages": [{"role": "robot"}]})
    assert bad.status_code == 422
    problem = problem_model.Problem.model_validate(bad.json())
    assert problem.errors and problem.errors[0].loc == "messages[0].role"


def test_request_models_accept_the_documented_examples() -> None:
    models: list[type[BaseModel]] = [schemas.AppendIn, schemas.BudgetPreviewIn, schemas.ContextIn]
    for model in models:
        extra = model.model_config.get("json_schema_extra")
        assert isinstance(extra, dict)
        examples = extra["examples"]
        assert isinstance(examples, list)
        for example in examples:
            model.model_validate(example)


async def test_a_message_object_as_role_is_a_422_naming_it(
    client: httpx.AsyncClient, sid: str
) -> None:
    # Found by schemathesis once the context request had a schema: it was a 500.
    await client.put(f"/sessions/{sid}", json={})
    bad = {"role": {}, "content": "", "tool_call_id": "0"}
    r = await client.post(f"/sessions/{sid}/context", json={"dynamic_context": [bad]})
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == "dynamic_context[0].role"
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [bad]})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "messages[0].role"
    assert (await client.get(f"/sessions/{sid}/messages")).json()["messages"] == []
