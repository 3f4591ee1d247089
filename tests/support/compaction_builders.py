"""Builders and doubles shared by the compaction unit tests."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from app.core.conversation import LoggedMessage
from app.core.limits import Role
from tests.support.dataset import DATASET

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


class FakeCounter:
    """chars/4 for Latin text, one token per CJK character: close enough, and predictable."""

    mode = "estimate"
    name = "fake"

    def count_text(self, text: str) -> int:
        cjk = len(_CJK.findall(text))
        return cjk + math.ceil((len(text) - cjk) / 4)

    def count_message(self, message: dict[str, Any]) -> int:
        return 4 + self.count_text(json.dumps(message, ensure_ascii=False))

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return 3 + sum(self.count_message(m) for m in messages)


COUNTER = FakeCounter()


@dataclass(frozen=True)
class EngineSettings:
    summary_temperature: float = 0.1
    compact_timeout_s: float = 2.0
    anchor_retry_enabled: bool = True
    user_messages_ratio: float = 0.15
    artifacts_ratio: float = 0.1
    usable_budget: int = 124_928


def msg(
    seq: int,
    role: Role,
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    pinned: bool = False,
    include_in_context: bool = True,
    tokens: int | None = None,
) -> LoggedMessage:
    body: dict[str, Any] = {"role": role, "content": content}
    if tool_calls is not None:
        body["tool_calls"] = tool_calls
    if tool_call_id is not None:
        body["tool_call_id"] = tool_call_id
    return LoggedMessage(
        seq=seq,
        id=f"m{seq}",
        role=role,
        body=body,
        token_count=COUNTER.count_message(body) if tokens is None else tokens,
        pinned=pinned,
        include_in_context=include_in_context,
    )


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def log_of(items: Sequence[dict[str, Any]], *, start: int = 1) -> list[LoggedMessage]:
    """LoggedMessages from OpenAI messages, seqs from `start`; `pinned` read from each dict."""
    out: list[LoggedMessage] = []
    for i, m in enumerate(items):
        out.append(
            msg(
                start + i,
                m["role"],
                m.get("content"),
                tool_calls=m.get("tool_calls"),
                tool_call_id=m.get("tool_call_id"),
                pinned=bool(m.get("pinned")),
            )
        )
    return out


def chat(turns: Sequence[tuple[str, str]], *, start: int = 1) -> list[LoggedMessage]:
    """A plain dialogue: one (user, assistant) pair per turn."""
    items: list[dict[str, Any]] = []
    for user, assistant in turns:
        items.append({"role": "user", "content": user})
        items.append({"role": "assistant", "content": assistant})
    return log_of(items, start=start)


def dataset_sessions() -> Iterator[dict[str, Any]]:
    if not DATASET.exists():
        pytest.skip(f"dataset {DATASET} not present")
    with DATASET.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def dataset_session(prefix: str) -> dict[str, Any]:
    for session in dataset_sessions():
        if str(session["id"]).startswith(prefix):
            return session
    pytest.skip(f"no session {prefix!r} in the dataset")
