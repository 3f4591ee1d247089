"""A context request's parameters, read from a `POST` body or a `GET` query (pure).

Both entrances of the payload (app/api/context_lane.py) build a `ContextParams`
here; every bound comes from app/core/limits.py and is checked by
app/context/validation.py, so each problem is a 422 naming its field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from app.context.validation import validate_context_params
from app.core.errors import invalid
from app.core.jsonsafe import sendable_problem
from app.core.limits import DEFAULT_FORMAT, FORMATS, PREFIX_ID_MAX, PREFIX_ID_PATTERN

POST_FIELDS = (
    "system",
    "tools",
    "dynamic_context",
    "mode",
    "max_tokens",
    "strategy",
    "reserve_output_tokens",
    "preview_limit_tokens",
    "format",
    "previous_prefix_id",
    "recall",
)
_PREFIX_ID = re.compile(PREFIX_ID_PATTERN)


@dataclass(frozen=True, slots=True)
class ContextParams:
    """Per-call overrides; None means "the session's own"."""

    max_tokens: int | None = None
    strategy: str | None = None
    mode: str | None = None
    reserve_output_tokens: int = 0
    preview_limit_tokens: int | None = None
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    dynamic_context: list[Any] = field(default_factory=list)
    format: str = DEFAULT_FORMAT
    # The `prefix_id` of the previous payload of this stream, echoed by the client:
    # makes `usage.stable_prefix_tokens` exact (see app/context/stability.py).
    previous_prefix_id: str | None = None
    # The recall tool and the note on what was left out; None: the session's setting.
    recall: bool | None = None
    # A look, not a model call (the console): no trim is stored as the stream's layout,
    # no event or metric is recorded. Not a parameter of the HTTP API.
    observe: bool = False


def from_query(
    max_tokens: int | None,
    strategy: str | None,
    mode: str | None,
    reserve_output_tokens: int,
    format: str,
    previous_prefix_id: str | None,
    recall: bool | None = None,
    preview_limit_tokens: int | None = None,
) -> ContextParams:
    """The GET parameters, once their types and bounds are checked (app/api/models/requests.py
    `ContextQuery`)."""
    validate_context_params(
        strategy=strategy,
        max_tokens=max_tokens,
        reserve_output_tokens=reserve_output_tokens if max_tokens else None,
        preview_limit_tokens=preview_limit_tokens,
        mode=mode,
    )
    return ContextParams(
        max_tokens=max_tokens,
        strategy=strategy,
        mode=mode,
        reserve_output_tokens=reserve_output_tokens,
        preview_limit_tokens=preview_limit_tokens,
        format=format,
        previous_prefix_id=previous_prefix_id,
        recall=recall,
    )


def from_body(body: dict[str, Any]) -> ContextParams:
    """The POST parameters from its JSON object body, checked field by field."""
    unknown = sorted(set(body) - set(POST_FIELDS))
    if unknown:
        raise invalid(unknown[0], "is not a field of a context request")
    fmt = body.get("format", DEFAULT_FORMAT)
    if fmt not in FORMATS:
        raise invalid("format", f"must be one of {', '.join(FORMATS)}")
    previous = body.get("previous_prefix_id")
    if previous is not None and (
        not isinstance(previous, str)
        or len(previous) > PREFIX_ID_MAX
        or _PREFIX_ID.fullmatch(previous) is None
    ):
        raise invalid(
            "previous_prefix_id",
            f"must be a string of at most {PREFIX_ID_MAX} printable ASCII characters",
        )
    recall = body.get("recall")
    if recall is not None and not isinstance(recall, bool):
        raise invalid("recall", "must be true or false")
    validate_context_params(
        **{
            k: body.get(k)
            for k in POST_FIELDS
            if k not in ("format", "previous_prefix_id", "recall")
        }
    )
    # The call's dynamic context is hashed into the `prefix_id`, counted and sent on to
    # the model: a lone surrogate escape (`"\ud800"`), a non-finite number or nesting too
    # deep is a 422 naming the field, not a 500 (or the invalid JSON `NaN` in the
    # payload). Its tools meet the same rule in validate_context_params.
    found = sendable_problem(body.get("dynamic_context"), "dynamic_context")
    if found:
        raise invalid(*found)
    return ContextParams(
        max_tokens=body.get("max_tokens"),
        strategy=body.get("strategy"),
        mode=body.get("mode"),
        reserve_output_tokens=body.get("reserve_output_tokens") or 0,
        preview_limit_tokens=body.get("preview_limit_tokens"),
        system=body.get("system"),
        tools=body.get("tools"),
        dynamic_context=list(body.get("dynamic_context") or []),
        format=fmt,
        previous_prefix_id=previous,
        recall=recall,
    )
