"""An append ready for the group commit (app/messages/group_transaction.write_group)."""

from __future__ import annotations

import uuid
from typing import Any

from app.core.settings import Settings
from app.core.tokens import get_counter
from app.index.lexemes import session_lexeme
from app.index.vector import message_vector
from app.messages.validation import parse_batch
from app.messages.write import Pending


def pending(
    settings: Settings,
    sid: str,
    messages: list[dict[str, Any]],
    lock_token: str | None = None,
    tenant: str = "default",
) -> Pending:
    batch = parse_batch(messages, max_messages=100, max_message_bytes=1 << 20)
    counter = get_counter(settings.default_model)
    counts = [counter.count_message(m.body) for m in batch]
    ids = [m.id or f"msg_{uuid.uuid4().hex}" for m in batch]
    key = session_lexeme(tenant, sid)
    search: list[bytes | None] = [message_vector(m.body, key) for m in batch]
    return Pending(tenant, sid, batch, counter, counts, lock_token, settings, ids, search)
