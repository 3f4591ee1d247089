"""Session settings, stats and budget status."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.core import budget as budgets
from app.core.bill import session_bill
from app.core.budget import budget_of, effective_model, session_compaction
from app.core.errors import NotFound, ValidationFailed, in_words, invalid
from app.core.jsonsafe import storable_problem
from app.core.settings import CompactionSettings, Settings, check_compaction
from app.core.tokens import calibration, get_counter, known_context_limit
from app.db.models import SessionRow
from app.sessions import repository as repo
from app.sessions.lease_rule import check_write
from app.sessions.recount import recount_session
from app.sessions.schemas import SessionSettingsIn

SETTING_FIELDS = (
    "model",
    "context_limit",
    "system_prompt",
    "tools",
    "strategy",
    "anchors",
    "auto_compact",
    "recall",
    "compaction",
    "metadata",
)


def new_session_values(tenant: str, sid: str, settings: Settings) -> dict[str, Any]:
    counter = get_counter(settings.default_model)
    return {"tenant_id": tenant, "id": sid, "tokenizer": counter.name}


async def get_session(db: AsyncSession, tenant: str, sid: str) -> SessionRow:
    row = await repo.get(db, tenant, sid)
    if row is None:
        raise NotFound(f"session {sid!r} does not exist")
    return row


async def put_session(
    db: AsyncSession,
    tenant: str,
    sid: str,
    body: SessionSettingsIn,
    settings: Settings,
    check_defaults: Callable[[str, Any], None],
) -> tuple[SessionRow, bool]:
    """Create or update a session's settings. `check_defaults(field, value)` refuses a
    default the payload could not use (its `tools`, its `strategy`): the rules are the
    context call's, which the caller hands in so that sessions stay below context."""
    created = await repo.insert_if_missing(db, new_session_values(tenant, sid, settings))
    locked = await repo.get_for_update(db, tenant, sid)
    assert locked is not None  # inserted or found above, in this transaction
    row, lease_live = locked
    check_write(row, lease_live, body.lock_token)

    changes = {f: getattr(body, f) for f in SETTING_FIELDS if f in body.model_fields_set}
    _validate_changes(changes, row, settings, check_defaults)
    defaults = {
        "tools": [],
        "anchors": [],
        "auto_compact": True,
        "recall": False,
        "compaction": {},
        "metadata": {},
    }
    for name, value in changes.items():
        if value is None and name in defaults:
            value = defaults[name]
        setattr(row, "metadata_" if name == "metadata" else name, value)

    counter = get_counter(effective_model(row, settings))
    row.system_tokens = (
        counter.count_message({"role": "system", "content": row.system_prompt})
        if row.system_prompt
        else 0
    )
    row.tools_tokens = counter.count_tools(row.tools)
    if counter.name != row.tokenizer:
        await recount_session(db, row, counter)
    _check_limits(row, settings)
    await db.flush()
    return row, created


def _validate_changes(
    changes: dict[str, Any],
    row: SessionRow,
    settings: Settings,
    check_defaults: Callable[[str, Any], None],
) -> None:
    for name, value in changes.items():
        bad = storable_problem(value, name)
        if bad:
            raise invalid(*bad)
    for name in ("tools", "strategy"):
        if changes.get(name) is not None:
            check_defaults(name, changes[name])
    overrides = changes.get("compaction")
    if overrides:
        unknown = sorted(set(overrides) - set(CompactionSettings.model_fields))
        if unknown:
            raise invalid(f"compaction.{unknown[0]}", "is not a compaction setting")
        typed = [
            {"loc": f"compaction.{k}", "msg": problem}
            for k, v in overrides.items()
            if (problem := _json_type_problem(k, v))
        ]
        if typed:
            raise ValidationFailed(typed)
        merged = {**settings.compaction.model_dump(), **overrides}
        try:
            CompactionSettings(**merged)
        except ValidationError as exc:
            errors = [
                {"loc": "compaction" + "".join(f".{p}" for p in e["loc"]), "msg": in_words(e)}
                for e in exc.errors()
                if e["loc"]
            ]
            if not errors:
                # Only the cross-field rules failed: named as the session spells them
                # (the model's own message names the server's environment variables).
                merged_settings = CompactionSettings.model_construct(**merged)
                errors = [
                    {"loc": "compaction", "msg": problem}
                    for problem in check_compaction(merged_settings, session=True)
                ]
            raise ValidationFailed(errors or [{"loc": "compaction", "msg": "invalid"}]) from None


def _json_type_problem(name: str, value: object) -> str | None:
    """A JSON type check of one override. The settings class parses environment strings
    and so takes "3" for 3 and "false" for False; the raw value was then stored, and
    every compaction of the session did arithmetic on a string."""
    kind = CompactionSettings.model_fields[name].annotation
    if kind is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "must be an integer" if kind is int else "must be a number"
    if kind is int and not isinstance(value, int):
        return "must be an integer"
    return None


def _check_limits(row: SessionRow, settings: Settings) -> None:
    model = effective_model(row, settings)
    known = known_context_limit(model)
    for loc, value in (
        ("context_limit", row.context_limit),
        ("compaction.context_limit", row.compaction.get("context_limit")),
    ):
        if known is not None and value is not None and value > known:
            raise invalid(loc, f"{value} exceeds the context length of {model} ({known})")
    problems = budgets.override_problems(session_compaction(row, settings))
    if problems:
        raise invalid("compaction", problems[0])


def view(row: SessionRow, settings: Settings) -> dict[str, Any]:
    """Settings plus stats, the body of GET /sessions/{id}."""
    c = session_compaction(row, settings)
    lease = None
    if row.lease_token is not None:
        lease = {
            "owner": row.lease_owner,
            "expires_at": row.lease_expires_at,
            "fencing_token": row.fencing_token,
        }
    counts = {
        "system": row.count_system,
        "user": row.count_user,
        "assistant": row.count_assistant,
        "tool": row.count_tool,
    }
    return {
        "id": row.id,
        "model": row.model,
        "effective_model": effective_model(row, settings),
        "context_limit": c.context_limit,
        "system_prompt": row.system_prompt,
        "tools": row.tools,
        "strategy": row.strategy,
        "anchors": row.anchors,
        "auto_compact": row.auto_compact,
        "recall": row.recall,
        "compaction": row.compaction,
        "metadata": row.metadata_,
        "tokenizer": row.tokenizer,
        "stats": {
            "message_counts": {**counts, "total": sum(counts.values())},
            "last_seq": row.last_seq,
            "last_compaction_seq": row.last_compaction_seq,
            "context_tokens": row.context_tokens - row.watermark_context_tokens,
            "token_calibration": calibration.Calibration.from_json(row.token_calibration).view(
                get_counter(effective_model(row, settings)).mode == "estimate"
            ),
            "re_reads": row.re_reads,
            "bill": session_bill(
                calls=row.bill_calls,
                input_tokens=row.bill_input_tokens,
                cached_input_tokens=row.bill_cached_input_tokens,
                full_history_input_tokens=row.bill_full_history_input_tokens,
                summariser_input_tokens=row.summariser_input_tokens,
                summariser_output_tokens=row.summariser_output_tokens,
                reported_calls=row.bill_reported_calls,
            ),
        },
        "last_seq": row.last_seq,
        "last_compaction_seq": row.last_compaction_seq,
        "lease": lease,
        "budget": budget_of(row, settings).as_dict(),
        "created_at": row.created_at,
        "updated_at": row.updated_at,
    }
