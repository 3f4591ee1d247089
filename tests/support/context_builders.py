"""Builders and the invariant checker shared by the context-assembly tests."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessageParam
from pydantic import TypeAdapter

from app.context import AssembledContext, AssemblyRequest, backfill
from app.core.conversation import LoggedMessage
from app.core.tokens import get_counter
from tests.support.dataset import DATASET

COUNTER = get_counter(None)
OPENAI_MESSAGES: TypeAdapter[list[ChatCompletionMessageParam]] = TypeAdapter(
    list[ChatCompletionMessageParam]
)
PROTOCOL_FIELDS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls", "refusal"},
    "tool": {"role", "content", "tool_call_id"},
}


def logged(seq: int, body: Mapping[str, Any], **flags: Any) -> LoggedMessage:
    return LoggedMessage(
        seq=seq,
        id=f"m{seq}",
        role=body["role"],
        body=dict(body),
        token_count=COUNTER.count_message(body),
        **flags,
    )


def log_of(messages: Sequence[Mapping[str, Any]], start: int = 1) -> list[LoggedMessage]:
    return [logged(start + i, m) for i, m in enumerate(messages)]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None, *calls: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            for c in calls
        ]
    return msg


def tool(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def load_sessions() -> list[dict[str, Any]]:
    if not DATASET.exists():
        pytest.skip(f"dataset not found at {DATASET}")
    with DATASET.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def iter_groups(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """Yields a description of every tool-group violation in a payload."""
    waiting: set[str] = set()
    for i, m in enumerate(messages):
        if m["role"] == "tool":
            if m.get("tool_call_id") not in waiting:
                yield f"messages[{i}]: tool result without its call"
            waiting.discard(str(m.get("tool_call_id")))
            continue
        if waiting:
            yield f"messages[{i}]: calls {sorted(waiting)} without results"
        waiting = {c["id"] for c in m.get("tool_calls") or ()}
    if waiting:
        yield f"end: calls {sorted(waiting)} without results"


def sendable(history: Sequence[LoggedMessage]) -> dict[int, LoggedMessage]:
    """Messages that may reach the model, computed independently of app.context:
    in context, not a plain historical system message, and in a complete group."""
    out: dict[int, LoggedMessage] = {}
    i = 0
    hist = [m for m in history if m.include_in_context]
    while i < len(hist):
        m = hist[i]
        if m.role == "system" and (m.metadata or {}).get("kind") != "summary":
            i += 1
        elif m.role == "assistant" and m.tool_call_ids:
            ids, j = set(m.tool_call_ids), i + 1
            while j < len(hist) and hist[j].role == "tool":
                ids.discard(str(hist[j].body.get("tool_call_id")))
                j += 1
            if not ids:
                for k in range(i, j):
                    out[hist[k].seq] = hist[k]
            elif j == len(hist) == i + 1 and m.error is not None and m.text:
                out[m.seq] = m  # an errored partial answer is sent without its calls
            i = j
        elif m.role == "tool":
            i += 1
        else:
            out[m.seq] = m
            i += 1
    return out


def check(request: AssemblyRequest, result: AssembledContext) -> None:
    """Every invariant of SPEC §3 and §9 that holds whatever the strategy."""
    counter = request.counter
    msgs: list[dict[str, Any]] = [dict(m) for m in result.messages]
    OPENAI_MESSAGES.validate_python(msgs)
    for i, m in enumerate(msgs):
        assert set(m) <= PROTOCOL_FIELDS[m["role"]], (i, sorted(m))
    assert list(iter_groups(msgs)) == []
    exact = counter.count_messages(msgs) + counter.count_tools(list(result.tools))
    assert result.usage.input_tokens == exact
    assert result.usage.breakdown.total == exact
    limit = request.budget - request.reserve_output_tokens
    assert result.usage.budget == limit
    assert result.over_budget == (exact > limit)

    kept = list(result.kept_seqs)
    assert kept == sorted(set(kept)), "log order"
    history_msgs = msgs[len(msgs) - len(kept) :] if kept else []
    assert len(history_msgs) == len(kept)
    by_seq = {m.seq: m for m in request.history}
    for seq, sent in zip(kept, history_msgs, strict=True):
        assert sent["role"] == by_seq[seq].role

    covered: list[int] = []
    for d in result.decisions:
        covered.extend(range(d.seq, (d.through or d.seq) + 1))
    assert covered == sorted(set(covered)), "one decision per seq"
    assert set(by_seq) <= set(covered)
    dropped = sum(
        (d.through or d.seq) - d.seq + 1 for d in result.decisions if d.action == "dropped"
    )
    assert result.dropped_count == dropped
    decided = {s: d for d in result.decisions for s in range(d.seq, (d.through or d.seq) + 1)}
    for seq in kept:
        assert decided[seq].action in ("kept", "preview", "cut")

    through = request.summary.through_seq if request.summary else 0
    # The turn anchor: the latest user message stays even below the watermark (SPEC §5).
    anchor = max((s for s, lm in by_seq.items() if lm.role == "user"), default=None)
    ok = sendable([m for m in request.history if m.seq > through or m.seq == anchor])
    # Below the watermark, the compacted units a strategy sends as recent context
    # (app/context/backfill.py): whole groups, the newest first, never a user message.
    below = sendable(list(request.history)) if through else {}
    for seq, lm in by_seq.items():
        if seq <= through and seq != anchor and seq in kept:
            assert seq in below and lm.role != "user", (seq, lm, decided[seq], through, anchor)
            assert decided[seq].rule in (backfill.RULE, "tool_group"), decided[seq]
            continue
        if seq not in ok:
            assert seq not in kept
        if seq <= through and seq != anchor:
            assert decided[seq].rule == "summarized"
        elif not lm.include_in_context:
            assert decided[seq].rule == "ui_only"
        elif lm.role == "system" and (lm.metadata or {}).get("kind") != "summary":
            assert decided[seq].rule == "system_message"
        if lm.role == "tool" and seq in kept and lm.token_count > request.preview_limit_tokens:
            sent = history_msgs[kept.index(seq)]
            assert f"/sessions/{request.session_id}/messages/{seq}" in sent["content"]
            assert counter.count_message(sent) <= request.preview_limit_tokens
    if not result.over_budget:
        users = [s for s, lm in ok.items() if lm.role == "user"]
        if users:
            assert max(users) in kept, "latest user message"
        for seq, lm in ok.items():
            if lm.pinned:
                assert seq in kept, f"pinned seq {seq}"
