"""Wiring the models of `app.api.models` (requests and responses) into `/openapi.json`.

`request_body(Model)` is an `openapi_extra` for a handler that reads its body as
plain JSON (and validates it by hand): the operation's `requestBody` becomes a
reference to `Model`. `answers({201: Model, ...})` documents the answers by status
without replacing the handler's `dict[str, Any]` response model (no per-request
validation against the models; the serialisation path is unchanged).
`install(app)` adds the referenced models to `components.schemas` and replaces
the untyped body FastAPI derives from `dict[str, Any]` by the reference.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from app.api.models.problem import Problem

_REF = "#/components/schemas/{model}"
_BODY_MODELS: dict[str, type[BaseModel]] = {"Problem": Problem}


def request_body(model: type[BaseModel], description: str | None = None) -> dict[str, Any]:
    _BODY_MODELS[model.__name__] = model
    body: dict[str, Any] = {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}},
    }
    if description:
        body["description"] = description
    return {"requestBody": body, "x-contextd-typed-body": True}


def answers(
    models: dict[int, tuple[type[BaseModel] | Any, str]],
) -> dict[int | str, dict[str, Any]]:
    """`responses=` for FastAPI: each status with its model and description."""
    return {
        status: {"model": model, "description": text} for status, (model, text) in models.items()
    }


def problem_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": _REF.format(model="Problem")}}},
    }


def _clean(node: Any) -> None:
    """A schema holding a `$ref` keeps only it: FastAPI merges the untyped schema it
    derived from `dict[str, Any]` with the reference given in `openapi_extra`/`responses`."""
    if isinstance(node, dict):
        if "$ref" in node and isinstance(node["$ref"], str):
            for key in [k for k in node if k not in ("$ref", "description")]:
                del node[key]
            return
        for value in node.values():
            _clean(value)
    elif isinstance(node, list):
        for value in node:
            _clean(value)


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, model in _BODY_MODELS.items():
            definition = model.model_json_schema(ref_template=_REF, mode="validation")
            for sub, sub_schema in definition.pop("$defs", {}).items():
                components.setdefault(sub, sub_schema)
            components[name] = definition
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                if isinstance(operation, dict) and operation.pop("x-contextd-typed-body", False):
                    body = operation["requestBody"]["content"]["application/json"]
                    body.pop("examples", None)
                    body.pop("example", None)
                _clean(operation)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


# The errors every route may answer, each documented as the one `Problem` model.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: problem_response("missing or wrong API key (when keys are configured)"),
    404: problem_response("no such session or message in the caller's tenant"),
    409: problem_response(
        "lock_held, lock_required, stale_lock_token, idempotency_conflict, or "
        "compaction_failed (payloads, with COMPACTION_FAIL_OPEN false)"
    ),
    413: problem_response("body or message larger than the configured limit"),
    422: problem_response("validation_error: `errors` names each faulty field"),
    503: problem_response("the database is unreachable; retry after `Retry-After` seconds"),
}
