"""Where payload streams' layouts live: `context_layouts`, one row per tenant, session
and stream, read with the session row and written by a trim (app/context/stability.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import bindparam, tuple_
from sqlalchemy.dialects.postgresql import insert

from app.context.trim_state import Layout
from app.db.engine import Compiled
from app.db.models import ContextLayoutRow, SessionRow
from app.db.scope import same_session

# Every stored stream of a session, read along with its row (app/context/repository.py
# `payload_session`, a LEFT JOIN: one row per stream, usually one): params_key, then
# what `stored` reads. The columns as stored, not aggregated into one JSON value:
# building that value detoasts and re-serialises every layout (~0.3-0.5 ms here).
STREAM_COLUMNS = (
    ContextLayoutRow.params_key,
    ContextLayoutRow.generation,
    ContextLayoutRow.watermark,
    ContextLayoutRow.through_seq,
    ContextLayoutRow.kept,
    ContextLayoutRow.replaced,
)
STREAM_JOIN = same_session(ContextLayoutRow, SessionRow)


def stored(streams: Mapping[str, Sequence[Any]], key: str) -> tuple[Layout | None, Layout | None]:
    """The stream's stored layout and the one it replaced; `streams` maps each stored
    params_key to the rest of its `STREAM_COLUMNS`."""
    row = streams.get(key)
    if row is None:
        return None, None
    layout = Layout.of_json(row[0], row[1], row[2], row[3])
    old = row[4]
    replaced = (
        Layout.of_json(old["generation"], old["watermark"], old["through_seq"], old["kept"])
        if isinstance(old, dict)
        else None
    )
    return layout, replaced


_STORED = (  # the key first
    "tenant_id",
    "session_id",
    "params_key",
    "generation",
    "watermark",
    "through_seq",
    "kept",
    "layout_id",
    "replaced",
)


def _store_statement() -> Any:
    # Built once: a statement made per call is compiled per call (SQLAlchemy caches by
    # statement structure, and building `excluded` alone was ~4% of a trimming call).
    t = ContextLayoutRow.__table__
    stmt = insert(ContextLayoutRow).values({k: bindparam(k, type_=t.c[k].type) for k in _STORED})
    excluded = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=[t.c.tenant_id, t.c.session_id, t.c.params_key],
        set_={
            k: excluded[k] for k in _STORED if k not in ("tenant_id", "session_id", "params_key")
        },
        where=tuple_(t.c.generation, t.c.watermark, t.c.through_seq)
        <= tuple_(excluded.generation, excluded.watermark, excluded.through_seq),
    )


_STORE = Compiled(_store_statement())


async def store(db: Any, session: SessionRow, key: str, layout: Layout, replaced: Layout) -> None:
    """The trim's one write, on the payload's asyncpg connection (one statement, its own
    transaction). Of two trims racing, the one for the newer log stays."""
    values = {
        "tenant_id": session.tenant_id,
        "session_id": session.id,
        "params_key": key,
        "generation": layout.generation,
        "watermark": layout.watermark,
        "through_seq": layout.through_seq,
        # JSON text: the dialect's jsonb codec on the connection takes it as such.
        "kept": json.dumps(layout.entries()),
        "layout_id": layout.id,
        "replaced": json.dumps(replaced.to_json()),
    }
    await db.execute(_STORE.sql, *_STORE.args(values))
