"""Rule-based memory-flush candidates of a compaction range (SPEC §5).

Before a range is folded into a summary, the statements worth remembering
beyond this session are offered to the agent as candidates: each sentence of
a user or assistant message that states a constraint, preference, decision or
TODO, or names identifiers. Tool outputs are not mined: they are bulky, and
what matters in them is usually restated by the assistant.

Confidence is a transparent sum: the strongest tag's base weight, a bonus
for a user statement (the user's word is the one to keep), a bonus per
further tag; capped to [0, 1]. Candidate ids are derived from the session,
message and sentence, so re-running a job yields the same ids.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from app.compaction.signals import classify, normalise, split_sentences, truncate_utf8
from app.compaction.turns import CompactionPlan
from app.core.conversation import LoggedMessage
from app.core.settings import CompactionSettings

_BASE = {"constraint": 0.6, "preference": 0.55, "decision": 0.55, "todo": 0.45, "identifier": 0.25}
_USER_BONUS = 0.2
_EXTRA_TAG_BONUS = 0.05
_PINNED_BONUS = 0.1
_MIN_CHARS = 6

log = structlog.get_logger("contextd.compaction")


@dataclass(frozen=True, slots=True)
class FlushCandidate:
    candidate_id: str
    source_session_id: str
    source_message_ids: tuple[str, ...]
    candidate_text: str
    constraint_tags: tuple[str, ...]
    confidence: float
    created_at: datetime
    source_seq: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "candidate_id": self.candidate_id,
            "source_session_id": self.source_session_id,
            "source_message_ids": list(self.source_message_ids),
            "candidate_text": self.candidate_text,
            "constraint_tags": list(self.constraint_tags),
            "confidence": self.confidence,
            "created_at": self.created_at.isoformat(),
        }


def _confidence(tags: set[str], *, from_user: bool, pinned: bool) -> float:
    base = max(_BASE[t] for t in tags)
    score = base + _EXTRA_TAG_BONUS * (len(tags) - 1)
    score += _USER_BONUS if from_user else 0.0
    score += _PINNED_BONUS if pinned else 0.0
    return round(min(1.0, max(0.0, score)), 3)


def _candidate_id(session_id: str, message_id: str, index: int) -> str:
    digest = hashlib.sha256(f"{session_id}\x00{message_id}\x00{index}".encode()).hexdigest()
    return f"fc_{digest[:24]}"


def extract_candidates(
    messages: Sequence[LoggedMessage],
    *,
    session_id: str,
    max_candidates: int = 20,
    max_text_bytes: int = 2048,
    now: datetime | None = None,
) -> list[FlushCandidate]:
    """At most `max_candidates` candidates from `messages`, best first (ties: oldest first)."""
    if max_candidates <= 0:
        return []
    created = now or datetime.now(UTC)
    seen: set[str] = set()
    found: list[FlushCandidate] = []
    for m in messages:
        if m.role not in ("user", "assistant") or not m.counts_in_context:
            continue
        for index, sentence in enumerate(split_sentences(m.text)):
            tags = classify(sentence)
            key = normalise(sentence)
            if not tags or len(key) < _MIN_CHARS or key in seen:
                continue
            seen.add(key)
            found.append(
                FlushCandidate(
                    candidate_id=_candidate_id(session_id, m.id, index),
                    source_session_id=session_id,
                    source_message_ids=(m.id,),
                    candidate_text=truncate_utf8(sentence, max_text_bytes),
                    constraint_tags=tuple(t for t in _BASE if t in tags),
                    confidence=_confidence(tags, from_user=m.role == "user", pinned=m.pinned),
                    created_at=created,
                    source_seq=m.seq,
                )
            )
    found.sort(key=lambda c: (-c.confidence, c.source_seq))
    return found[:max_candidates]


async def flush_candidates(
    plan: CompactionPlan, sid: str, c: CompactionSettings
) -> list[FlushCandidate] | None:
    """Memory-flush candidates of the range, or None when the flush is skipped: it
    took longer than `flush_timeout_s` or failed. The compaction goes on either way
    (`flush_skipped` in its metadata)."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(
                extract_candidates,
                plan.range_messages,
                session_id=sid,
                max_candidates=c.max_flush_candidates,
                max_text_bytes=c.max_candidate_text_bytes,
            ),
            c.flush_timeout_s,
        )
    except TimeoutError:
        log.warning("memory flush timed out; skipped", timeout_s=c.flush_timeout_s)
    except Exception:
        log.exception("memory flush failed; skipped")
    return None
