"""Validation of appended messages against the OpenAI chat protocol (pure).

Every problem is reported with the exact field path (`messages[3].tool_call_id`)
and all problems of a batch are reported at once, so a client fixes its payload
in one round trip. Checks that need the session's log (does this tool message
answer a call?) live in the service; everything here is local to the batch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from app.core.content_parts import part_problems
from app.core.errors import PayloadTooLarge, ValidationFailed
from app.core.jsonsafe import storable_problem
from app.core.limits import MESSAGE_ID_MAX, MODES, ROLES, Role

# contextd's own fields: accepted inline on each message, stored beside the body.
FLAG_FIELDS = ("id", "pinned", "include_in_context", "mode", "run_id", "metadata", "error")
# Fields contextd adds when it returns a message; a client may not send them.
RESERVED_FIELDS = ("seq", "token_count", "created_at")


@dataclass(slots=True)
class Incoming:
    """A validated message: the OpenAI body and contextd's flags, apart."""

    index: int
    role: Role
    body: dict[str, Any]
    id: str | None = None
    pinned: bool = False
    include_in_context: bool = True
    mode: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    call_ids: list[str] = field(default_factory=list)
    answers: str | None = None

    def flags(self) -> dict[str, Any]:
        return {
            "pinned": self.pinned,
            "include_in_context": self.include_in_context,
            "mode": self.mode,
            "run_id": self.run_id,
            "metadata": self.metadata,
            "error": self.error,
        }


class _Errors:
    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, loc: str, msg: str) -> None:
        self.items.append({"loc": loc, "msg": msg})


def parse_batch(raw: Any, *, max_messages: int, max_message_bytes: int) -> list[Incoming]:
    if not isinstance(raw, list):
        raise ValidationFailed([{"loc": "messages", "msg": "must be an array of messages"}])
    if not raw:
        raise ValidationFailed([{"loc": "messages", "msg": "must hold at least one message"}])
    if len(raw) > max_messages:
        raise ValidationFailed(
            [{"loc": "messages", "msg": f"at most {max_messages} messages per append"}]
        )
    errors = _Errors()
    out: list[Incoming] = []
    seen_ids: dict[str, int] = {}
    seen_calls: dict[str, int] = {}
    for i, item in enumerate(raw):
        loc = f"messages[{i}]"
        size = len(json.dumps(item, ensure_ascii=False, default=str).encode("utf-8", "replace"))
        if size > max_message_bytes:
            raise PayloadTooLarge(
                f"{loc} is {size} bytes; the limit is {max_message_bytes} bytes per message",
                errors=[{"loc": loc, "msg": f"larger than {max_message_bytes} bytes"}],
            )
        msg = _parse_one(item, i, errors)
        if msg is None:
            continue
        if msg.id is not None:
            if msg.id in seen_ids:
                errors.add(f"{loc}.id", f"repeats the id of messages[{seen_ids[msg.id]}]")
            seen_ids[msg.id] = i
        for j, call_id in enumerate(msg.call_ids):
            if call_id in seen_calls:
                errors.add(
                    f"{loc}.tool_calls[{j}].id", "repeats a tool call id earlier in this batch"
                )
            seen_calls[call_id] = i
        out.append(msg)
    if errors.items:
        raise ValidationFailed(errors.items)
    return out


def _parse_one(item: Any, i: int, errors: _Errors) -> Incoming | None:
    loc = f"messages[{i}]"
    if not isinstance(item, dict):
        errors.add(loc, "must be an object")
        return None
    before = len(errors.items)
    bad = storable_problem(item, loc)
    if bad:
        errors.add(*bad)
        return None
    role = item.get("role")
    if role not in ROLES:
        errors.add(f"{loc}.role", f"must be one of {', '.join(ROLES)}")
        return None
    for name in RESERVED_FIELDS:
        if name in item:
            errors.add(f"{loc}.{name}", "is assigned by contextd and cannot be sent")
    body = {k: v for k, v in item.items() if k not in FLAG_FIELDS}
    msg = Incoming(index=i, role=cast(Role, role), body=body)
    _flags(item, msg, loc, errors)
    _content(body, msg.role, loc, errors)
    if "name" in body and not isinstance(body["name"], str):
        errors.add(f"{loc}.name", "must be a string")
    _tool_fields(body, msg, loc, errors)
    # An assistant's error records a model failure; a tool's, a failed tool call
    # (sent to Anthropic as `is_error`).
    if msg.error is not None and msg.role not in ("assistant", "tool"):
        errors.add(
            f"{loc}.error",
            "only assistant (model failure) and tool (failed call) messages carry one",
        )
    return msg if len(errors.items) == before else None


def _flags(item: dict[str, Any], msg: Incoming, loc: str, errors: _Errors) -> None:
    if "id" in item and item["id"] is not None:
        mid = item["id"]
        if not isinstance(mid, str) or not 1 <= len(mid) <= MESSAGE_ID_MAX:
            errors.add(f"{loc}.id", f"must be a string of 1 to {MESSAGE_ID_MAX} characters")
        else:
            msg.id = mid
    for name in ("pinned", "include_in_context"):
        if name in item:
            if not isinstance(item[name], bool):
                errors.add(f"{loc}.{name}", "must be true or false")
            else:
                setattr(msg, name, item[name])
    mode = item.get("mode")
    if mode is not None and mode not in MODES:
        errors.add(f"{loc}.mode", f"must be one of {', '.join(MODES)}")
    msg.mode = mode if mode in MODES else None
    run_id = item.get("run_id")
    if run_id is not None and not isinstance(run_id, str):
        errors.add(f"{loc}.run_id", "must be a string")
    msg.run_id = run_id if isinstance(run_id, str) else None
    meta = item.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        errors.add(f"{loc}.metadata", "must be an object")
    msg.metadata = meta if isinstance(meta, dict) else None
    err = item.get("error")
    if err is not None:
        if not isinstance(err, dict):
            errors.add(f"{loc}.error", "must be an object {type, message}")
        else:
            for key in ("type", "message"):
                if not isinstance(err.get(key), str):
                    errors.add(f"{loc}.error.{key}", "must be a string")
            msg.error = err


def _content(body: dict[str, Any], role: str, loc: str, errors: _Errors) -> None:
    if "content" not in body or body["content"] is None:
        if role == "assistant" and (body.get("tool_calls") or body.get("refusal") is not None):
            return
        if role == "assistant":
            errors.add(f"{loc}.content", "is required unless the assistant calls tools")
        else:
            errors.add(f"{loc}.content", f"is required on {role} messages")
        return
    content = body["content"]
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        errors.add(f"{loc}.content", "must be a string, an array of content parts, or null")
        return
    if not content:
        errors.add(f"{loc}.content", "an array of content parts must not be empty")
    for where, problem in part_problems(content, role):
        errors.add(f"{loc}.content{where}", problem)


def _tool_fields(body: dict[str, Any], msg: Incoming, loc: str, errors: _Errors) -> None:
    calls = body.get("tool_calls")
    if calls is not None:
        if msg.role != "assistant":
            errors.add(f"{loc}.tool_calls", "only assistant messages may call tools")
        elif not isinstance(calls, list) or not calls:
            errors.add(f"{loc}.tool_calls", "must be a non-empty array of tool calls")
        else:
            for j, call in enumerate(calls):
                call_id = _tool_call(call, f"{loc}.tool_calls[{j}]", errors)
                if call_id is not None:
                    msg.call_ids.append(call_id)
    call_ref = body.get("tool_call_id")
    if msg.role == "tool":
        if not isinstance(call_ref, str) or not call_ref:
            errors.add(f"{loc}.tool_call_id", "is required on tool messages")
        else:
            msg.answers = call_ref
    elif call_ref is not None:
        errors.add(f"{loc}.tool_call_id", "only tool messages answer tool calls")


def _tool_call(call: Any, loc: str, errors: _Errors) -> str | None:
    if not isinstance(call, dict):
        errors.add(loc, "must be an object {id, type, function}")
        return None
    ok = True
    call_id = call.get("id")
    if not isinstance(call_id, str) or not 1 <= len(call_id) <= MESSAGE_ID_MAX:
        errors.add(f"{loc}.id", f"must be a string of 1 to {MESSAGE_ID_MAX} characters")
        ok = False
    if call.get("type", "function") != "function":
        errors.add(f"{loc}.type", "must be 'function'")
        ok = False
    fn = call.get("function")
    if not isinstance(fn, dict):
        errors.add(f"{loc}.function", "must be an object {name, arguments}")
        return None
    if not isinstance(fn.get("name"), str) or not fn.get("name"):
        errors.add(f"{loc}.function.name", "must be a non-empty string")
        ok = False
    if not isinstance(fn.get("arguments"), str):
        errors.add(f"{loc}.function.arguments", "must be a string (JSON text)")
        ok = False
    return cast(str, call_id) if ok else None
