"""Queries on `messages` and `tool_calls`. Every query filters on (tenant_id, session_id)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.database import Driver
from app.db.models import MessageRow
from app.db.scope import of_session, session_row_sql, session_sql
from app.sessions.lease_rule import lease_live

# --- the append path, on the asyncpg connection itself (Database.driver) -------------------
# Fixed SQL texts: asyncpg prepares each once per connection and runs it by name.
# jsonb parameters are JSON text and jsonb results come back decoded (the codecs
# SQLAlchemy's dialect installs on every connection).

# The session row's columns an append decides on: budget, fencing, tokenizer; and
# `lease_live` as app/sessions/lease_rule.py states it, rendered once.
_LEASE_LIVE = lease_live().compile(
    dialect=postgresql.dialect(),  # type: ignore[no-untyped-call]
    compile_kwargs={"literal_binds": True},
)
# The two jsonb columns come back NULL when empty (most sessions), which saves
# decoding '{}' twice per append; SessionHead.of reads NULL as {}.
_HEAD = f"""model, context_limit, nullif(compaction, '{{}}') AS compaction,
    nullif(token_calibration, '{{}}') AS token_calibration, tokenizer, auto_compact,
    system_tokens, tools_tokens, summary_tokens, context_tokens, watermark_context_tokens,
    last_seq, lease_token, lease_owner, {_LEASE_LIVE} AS lease_live"""

# FOR NO KEY UPDATE, not FOR UPDATE: see app/sessions/repository.get_for_update.
LOCK_SESSION = f"""
SELECT {_HEAD} FROM sessions WHERE {session_row_sql()} FOR NO KEY UPDATE
"""

CREATE_SESSION = """
INSERT INTO sessions (tenant_id, id, tokenizer) VALUES ($1, $2, $3)
ON CONFLICT (tenant_id, id) DO NOTHING
"""

# Re-reads (SPEC §3; the rule in words: app/context/rereads.py, tested there on the same
# cases): for each distinct name-and-arguments key of the calls an append makes, the
# newest earlier call of that key (ix_tool_calls_key: one probe), its answer, and the
# session's newest stream layout; counted when the answer is at or below the watermark,
# over the preview limit, or covered by that layout (while it holds for the
# session's generation and watermark) without a unit sent whole (form 0) holding it.
# Every call already stored is earlier than the append's, and the earlier call and its
# answer were in a payload the model saw before it made this call: committed before
# this statement began, so its snapshot holds them. `{k}` makes the count per append
# of a group.
# This and `_GIVE_BACK` are f-strings first, for their key filters (app/db/scope.py), then
# `format` templates: `{{...}}` are format's fields, `_KEY` those the filters compare to.
_KEY = ("{tenant}", "{sid}")
_RE_READS = f"""
    SELECT {{k}} count(*) AS n
    FROM {{keys}}
    JOIN sessions h ON {session_row_sql("h", *_KEY)}
    CROSS JOIN LATERAL (
        SELECT t.answered_seq FROM tool_calls t
        WHERE {session_sql("t", *_KEY)} AND t.call_key = n.key
        ORDER BY t.seq DESC LIMIT 1
    ) AS p
    JOIN messages res ON {session_sql("res", *_KEY)}
        AND res.seq = p.answered_seq
    LEFT JOIN LATERAL (
        SELECT l.generation, l.watermark, l.through_seq, l.kept FROM context_layouts l
        WHERE {session_sql("l", *_KEY)}
        ORDER BY l.updated_at DESC LIMIT 1
    ) AS lay ON true
    WHERE res.seq <= h.last_compaction_seq
        OR res.token_count > {{preview}}
        OR (lay.generation = h.generation AND lay.watermark = h.last_compaction_seq
            AND res.seq <= lay.through_seq
            AND NOT EXISTS (
                SELECT 1 FROM jsonb_array_elements(lay.kept) AS e
                WHERE (e->>1)::int = 0 AND e->0 @> to_jsonb(res.seq)
            ))"""
_RE_READS_ONE = _RE_READS.format(
    tenant="$1", sid="$2", keys="unnest($27::text[]) AS n(key)", k="", preview="$28"
)
_RE_READS_GROUP = _RE_READS.format(
    tenant="r.tenant_id",
    sid="r.session_id",
    keys="r JOIN unnest($31::int[], $32::text[]) AS n(k, key) ON n.k = r.k",
    k="r.k AS k,",
    preview="$33",
)

# The turn anchor's tokens given back (SPEC §5): a compaction that cut inside a turn
# leaves that turn's user message at or below the watermark, still sent (the payload
# sends the session's latest user message whatever the watermark) and so still counted:
# `watermark_context_tokens` is then the log's total through the watermark *less* the
# anchor's tokens. An append that brings a user message makes the anchor no longer the
# latest one, no longer sent: the total through the watermark is the right figure again.
# Here, in the UPDATE that holds the session row's lock, so that no append or store
# interleaves, and with the watermark of the row as locked (correlated, so a store that
# committed while the append waited is the one read); the CASE runs the probe (one row
# of the messages' primary key) only for a batch with a user message. Setting it when
# nothing was kept below changes nothing: it is that total already.
_GIVE_BACK = f"""CASE WHEN {{n_user}} > 0 AND last_compaction_seq > 0 THEN coalesce((
            SELECT w.context_tokens_through FROM messages w
            WHERE {session_sql("w", *_KEY)}
                AND w.seq = sessions.last_compaction_seq
        ), watermark_context_tokens) ELSE watermark_context_tokens END"""
_GIVE_BACK_ONE = _GIVE_BACK.format(n_user="$6", tenant="$1", sid="$2")
_GIVE_BACK_GROUP = _GIVE_BACK.format(n_user="r.n_user", tenant="r.tenant_id", sid="r.session_id")

# One round trip stores a whole batch: the session row's UPDATE takes the row lock
# (FOR NO KEY UPDATE, as LOCK_SESSION) and hands its seq and token totals, as they
# were before, to the inserts; it returns what the caller checks before it commits
# (fencing, tokenizer, budget). Seqs are `base_seq + ordinal` and running token
# totals `base_tokens + through`, so the values computed before the lock stay right
# whatever committed meanwhile. Stored message ids and used call ids are skipped
# (ON CONFLICT DO NOTHING) and an answer only lands on an open call: the counts
# returned say whether the batch went in whole; when not, the caller rolls back and
# appends again the locked way, which names the problem. Each message's search
# vector (`search`, app/index/vector.py: made before the transaction, as the token
# counts are, and sent as a binary tsvector, which PostgreSQL reads without parsing)
# goes in with it: a search never misses an acknowledged message.
WRITE_BATCH = f"""
WITH rr AS (
    {_RE_READS_ONE}
), s AS (
    UPDATE sessions SET
        re_reads = re_reads + (SELECT n FROM rr),
        last_seq = last_seq + $3,
        context_tokens = context_tokens + $4,
        count_system = count_system + $5,
        count_user = count_user + $6,
        count_assistant = count_assistant + $7,
        count_tool = count_tool + $8,
        watermark_context_tokens = {_GIVE_BACK_ONE},
        updated_at = now()
    WHERE {session_row_sql()}
    RETURNING last_seq - $3 AS base_seq, context_tokens - $4 AS base_tokens, {_HEAD}
), m AS (
    INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body, token_count,
        context_tokens_through, pinned, include_in_context, mode, run_id, metadata, error,
        search)
    SELECT $1, $2, s.base_seq + u.ord, u.message_id, u.role, u.body, u.token_count,
        s.base_tokens + u.through, u.pinned, u.include_in_context, u.mode, u.run_id,
        u.metadata, u.error, u.search
    FROM s, unnest($9::text[], $10::text[], $11::jsonb[], $12::int[], $13::bigint[],
                   $14::bool[], $15::bool[], $16::text[], $17::text[], $18::jsonb[],
                   $19::jsonb[], $25::tsvector[]) WITH ORDINALITY
        AS u(message_id, role, body, token_count, through, pinned, include_in_context,
             mode, run_id, metadata, error, search, ord)
    ON CONFLICT (message_id, tenant_id, session_id) DO NOTHING
    RETURNING 1
), c AS (
    INSERT INTO tool_calls (tenant_id, session_id, call_id, seq, answered_seq, call_key)
    SELECT $1, $2, u.call_id, s.base_seq + u.ord, s.base_seq + u.answered_ord, u.call_key
    FROM s, unnest($20::text[], $21::bigint[], $22::bigint[], $26::text[])
        AS u(call_id, ord, answered_ord, call_key)
    ON CONFLICT (tenant_id, session_id, call_id) DO NOTHING
    RETURNING 1
), a AS (
    -- Answers to calls made before: an upsert, so that each is a probe of the primary
    -- key whatever the planner knows. As an UPDATE joined to the answers, plans made
    -- without statistics walked all of the session's calls (25k at 100k messages) to
    -- find them. An answer to no call inserts a row with seq 0 (never a seq) and so
    -- does not count: the batch is rolled back.
    INSERT INTO tool_calls AS t (tenant_id, session_id, call_id, seq, answered_seq)
    SELECT $1, $2, u.call_id, 0, s.base_seq + u.ord
    FROM s, unnest($23::text[], $24::bigint[]) AS u(call_id, ord)
    ON CONFLICT (tenant_id, session_id, call_id) DO UPDATE
        SET answered_seq = EXCLUDED.answered_seq
        WHERE t.answered_seq IS NULL
    RETURNING t.seq
)
SELECT s.*, (SELECT count(*) FROM m) AS messages_in, (SELECT count(*) FROM c) AS calls_in,
    (SELECT count(*) FROM a WHERE a.seq > 0) AS answers_in,
    (SELECT n FROM rr) AS re_reads_in
FROM s
"""

# WRITE_BATCH for the appends of several sessions at once (app/messages/group_commit.py):
# one transaction, one statement, however many sessions. `$1..$8` are one entry per
# append (its session and totals), the message, call and answer arrays carry the
# 1-based entry `k` each row belongs to, and `ord` its ordinal within that append.
# The rows are locked in key order first, so two groups that share sessions (two
# server processes) wait for each other instead of deadlocking. One row per session
# found comes back, with what WRITE_BATCH returns and `k`; what did not go in whole
# is rolled back by the caller, as for one append.
WRITE_GROUP = f"""
WITH r AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::int[],
                         $6::int[], $7::int[], $8::int[]) WITH ORDINALITY
        AS r(tenant_id, session_id, n, added, n_system, n_user, n_assistant, n_tool, k)
), locked AS MATERIALIZED (
    SELECT r.k FROM sessions JOIN r ON {session_row_sql("sessions", "r.tenant_id", "r.session_id")}
    ORDER BY sessions.tenant_id, sessions.id
    FOR NO KEY UPDATE OF sessions
), rr AS (
    {_RE_READS_GROUP}
    GROUP BY r.k
), s AS (
    UPDATE sessions SET
        re_reads = re_reads + coalesce((SELECT rr.n FROM rr WHERE rr.k = r.k), 0),
        last_seq = last_seq + r.n,
        context_tokens = context_tokens + r.added,
        count_system = count_system + r.n_system,
        count_user = count_user + r.n_user,
        count_assistant = count_assistant + r.n_assistant,
        count_tool = count_tool + r.n_tool,
        watermark_context_tokens = {_GIVE_BACK_GROUP},
        updated_at = now()
    FROM locked JOIN r ON r.k = locked.k
    WHERE {session_row_sql("sessions", "r.tenant_id", "r.session_id")}
    RETURNING r.k, sessions.tenant_id, sessions.id AS session_id,
        last_seq - r.n AS base_seq, context_tokens - r.added AS base_tokens, {_HEAD}
), m AS (
    INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body, token_count,
        context_tokens_through, pinned, include_in_context, mode, run_id, metadata, error,
        search)
    SELECT s.tenant_id, s.session_id, s.base_seq + u.ord, u.message_id, u.role, u.body,
        u.token_count, s.base_tokens + u.through, u.pinned, u.include_in_context, u.mode,
        u.run_id, u.metadata, u.error, u.search
    FROM s JOIN unnest($9::int[], $10::int[], $11::text[], $12::text[], $13::jsonb[],
                       $14::int[], $15::bigint[], $16::bool[], $17::bool[], $18::text[],
                       $19::text[], $20::jsonb[], $21::jsonb[], $29::tsvector[])
        AS u(k, ord, message_id, role, body, token_count, through, pinned,
             include_in_context, mode, run_id, metadata, error, search) ON u.k = s.k
    ON CONFLICT (message_id, tenant_id, session_id) DO NOTHING
    RETURNING tenant_id, session_id
), c AS (
    INSERT INTO tool_calls (tenant_id, session_id, call_id, seq, answered_seq, call_key)
    SELECT s.tenant_id, s.session_id, u.call_id, s.base_seq + u.ord,
        s.base_seq + u.answered_ord, u.call_key
    FROM s JOIN unnest($22::int[], $23::text[], $24::bigint[], $25::bigint[], $30::text[])
        AS u(k, call_id, ord, answered_ord, call_key) ON u.k = s.k
    ON CONFLICT (tenant_id, session_id, call_id) DO NOTHING
    RETURNING tenant_id, session_id
), a AS (
    -- As WRITE_BATCH's: a primary-key upsert, and an answer to no call counts nothing.
    INSERT INTO tool_calls AS t (tenant_id, session_id, call_id, seq, answered_seq)
    SELECT s.tenant_id, s.session_id, u.call_id, 0, s.base_seq + u.ord
    FROM s JOIN unnest($26::int[], $27::text[], $28::bigint[]) AS u(k, call_id, ord)
        ON u.k = s.k
    ON CONFLICT (tenant_id, session_id, call_id) DO UPDATE
        SET answered_seq = EXCLUDED.answered_seq
        WHERE t.answered_seq IS NULL
    RETURNING t.tenant_id, t.session_id, t.seq
)
SELECT s.*,
    (SELECT count(*) FROM m WHERE {session_sql("m", "s.tenant_id", "s.session_id")})
        AS messages_in,
    (SELECT count(*) FROM c WHERE {session_sql("c", "s.tenant_id", "s.session_id")})
        AS calls_in,
    (SELECT count(*) FROM a WHERE {session_sql("a", "s.tenant_id", "s.session_id")}
        AND a.seq > 0) AS answers_in,
    coalesce((SELECT rr.n FROM rr WHERE rr.k = s.k), 0) AS re_reads_in
FROM s
"""

# The optimistic append's transaction: WRITE_BATCH is planned once per connection,
# not on every execution (planning it was ~0.3 ms of PostgreSQL's CPU, as much as
# running it). The connection plans everything else afresh each time (app/db/engine.py,
# SERVER_SETTINGS: generic plans made on small tables outlived their tables), but
# every part of WRITE_BATCH is a probe of a unique key by construction (the
# session's primary key, the inserts' arbiter indexes), the same plan at any size
# (as `bench/plans.py` (since removed, last at 97ba89a) showed). SET LOCAL ends
# with the transaction, and rides in BEGIN's round trip.
BEGIN_GENERIC = "BEGIN; SET LOCAL plan_cache_mode = auto"

INSERT_EVENT = """
INSERT INTO events (tenant_id, session_id, type, data) VALUES ($1, $2, $3, $4)
"""

# One probe of the unique (message_id, tenant_id, session_id) key per id. With
# `message_id IN (...)` and no statistics, PostgreSQL priced the primary key's
# (tenant_id, session_id) prefix as cheap as the unique key (both "one row") and
# walked the whole session to find the ids: 13 ms at 5k messages, growing with
# the log. An equality on every column of a unique key is one row by construction.
MESSAGES_BY_ID = f"""
SELECT m.message_id, m.seq, m.role, m.body, m.token_count
FROM unnest($3::text[]) AS c(message_id)
CROSS JOIN LATERAL (
    SELECT * FROM messages m
    WHERE m.message_id = c.message_id AND {session_sql("m")}
    OFFSET 0
) AS m
"""

# One primary-key probe per id, whatever the planner knows. `call_id IN (...)`
# over a table never analysed (a new deployment, a restore) plans as a scan of the
# session's calls filtered afterwards: 44 ms at 100k messages instead of 0.03.
# OFFSET 0 keeps PostgreSQL from flattening the lateral subquery into that plan.
CALLS_BY_ID = f"""
SELECT t.call_id, t.seq, t.answered_seq
FROM unnest($3::text[]) AS c(call_id)
CROSS JOIN LATERAL (
    SELECT * FROM tool_calls t
    WHERE {session_sql("t")} AND t.call_id = c.call_id
    OFFSET 0
) AS t
"""


async def by_message_ids(conn: Driver, tenant: str, sid: str, ids: Sequence[str]) -> dict[str, Any]:
    """The stored messages with these ids: records of message_id, seq, role, body, token_count."""
    if not ids:
        return {}
    rows = await conn.fetch(MESSAGES_BY_ID, tenant, sid, sorted(set(ids)))
    return {r["message_id"]: r for r in rows}


async def tool_calls(
    conn: Driver, tenant: str, sid: str, call_ids: Sequence[str]
) -> dict[str, Any]:
    """The recorded calls with these ids: records of call_id, seq, answered_seq."""
    ids = sorted(set(call_ids))
    if not ids:
        return {}
    rows = await conn.fetch(CALLS_BY_ID, tenant, sid, ids)
    return {r["call_id"]: r for r in rows}


async def page(
    db: AsyncSession,
    tenant: str,
    sid: str,
    after_seq: int,
    limit: int,
    *,
    before_seq: int | None = None,
    descending: bool = False,
) -> list[MessageRow]:
    """Messages with `after_seq < seq < before_seq`, from either end of the range.

    Both directions walk the primary key, so reading the tail of a long log
    costs the page, never the log.
    """
    stmt = select(MessageRow).where(of_session(MessageRow, tenant, sid), MessageRow.seq > after_seq)
    if before_seq is not None:
        stmt = stmt.where(MessageRow.seq < before_seq)
    order = MessageRow.seq.desc() if descending else MessageRow.seq
    return list((await db.execute(stmt.order_by(order).limit(limit))).scalars())


async def one(db: AsyncSession, tenant: str, sid: str, seq: int) -> MessageRow | None:
    return await db.get(MessageRow, (tenant, sid, seq))


async def tail(db: AsyncSession, tenant: str, sid: str, from_seq: int) -> list[MessageRow]:
    """Every message with `seq >= from_seq`, in log order."""
    stmt = (
        select(MessageRow)
        .where(of_session(MessageRow, tenant, sid), MessageRow.seq >= from_seq)
        .order_by(MessageRow.seq)
    )
    return list((await db.execute(stmt)).scalars())
