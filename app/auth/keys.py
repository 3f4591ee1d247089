"""API keys: creation, revocation, and the keyring requests are checked against."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.db.models import ApiKeyRow
from app.db.scope import of_tenant

KEY_PREFIX = "ctxd_"
# Revocations and new keys take effect within this many seconds on every server.
CACHE_TTL_S = 5.0


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def env_keys(raw: str) -> list[tuple[str, str]]:
    """`key:tenant,key:tenant` → [(key, tenant)]. A key without a tenant joins `default`;
    `:tenant` names no key (nothing a request could present) and is skipped."""
    out: list[tuple[str, str]] = []
    for item in raw.split(","):
        item = item.strip()
        key, _, tenant = item.rpartition(":") if ":" in item else (item, "", "default")
        if key.strip():
            out.append((key, tenant.strip() or "default"))
    return out


def parse_env_keys(raw: str) -> dict[str, str]:
    """`key:tenant,...` → {sha256(key): tenant}."""
    return {hash_key(key): tenant for key, tenant in env_keys(raw)}


@dataclass(frozen=True, slots=True)
class CreatedKey:
    id: str
    key: str
    tenant: str


async def create_key(db: AsyncSession, tenant: str, name: str | None = None) -> CreatedKey:
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    key_id = secrets.token_hex(4)
    db.add(ApiKeyRow(id=key_id, tenant_id=tenant, key_hash=hash_key(key), name=name))
    await db.flush()
    return CreatedKey(key_id, key, tenant)


async def revoke_key(db: AsyncSession, key_or_id: str) -> bool:
    stmt = (
        update(ApiKeyRow)
        .where(
            (ApiKeyRow.id == key_or_id) | (ApiKeyRow.key_hash == hash_key(key_or_id)),
            ApiKeyRow.revoked_at.is_(None),
        )
        .values(revoked_at=func.now())
        .returning(ApiKeyRow.id)
    )
    return (await db.execute(stmt)).first() is not None


async def forget_all_keys(db: AsyncSession) -> tuple[int, int]:
    """Delete every key, revoked ones too: (deleted, of which active). With none left
    and no `CONTEXTD_API_KEYS`, the next server starts keyless (on loopback only); a
    server already running stays keyed (Keyring.enabled) until it restarts."""
    rows = (await db.execute(delete(ApiKeyRow).returning(ApiKeyRow.revoked_at))).all()
    return len(rows), sum(1 for (revoked_at,) in rows if revoked_at is None)


async def list_keys(db: AsyncSession, tenant: str | None = None) -> list[ApiKeyRow]:
    stmt = select(ApiKeyRow).order_by(ApiKeyRow.tenant_id, ApiKeyRow.created_at)
    if tenant:
        stmt = stmt.where(of_tenant(ApiKeyRow, tenant))
    return list(await db.scalars(stmt))


async def any_key(engine: AsyncEngine) -> bool:
    """Whether keys were ever created. Revoked ones count: revoking the last key
    must lock everyone out, not open a server already listening beyond loopback."""
    async with engine.connect() as conn:
        found = await conn.scalar(select(ApiKeyRow.id).limit(1))
    return found is not None


class Keyring:
    """Answers "which tenant owns this key?" for every request.

    Environment keys live in memory; database keys are looked up by hash and
    cached briefly, so a revocation reaches every server within CACHE_TTL_S.
    """

    def __init__(self, env_keys: dict[str, str]) -> None:
        self.env_keys = env_keys
        self.engine: AsyncEngine | None = None
        self._cache: dict[str, tuple[float, str | None]] = {}
        self._enabled: tuple[float, bool] | None = None
        self._asking: asyncio.Future[bool] | None = None
        self._looking_up: dict[str, asyncio.Future[str | None]] = {}

    async def enabled(self) -> bool:
        if self.env_keys:
            return True
        now = time.monotonic()
        if self._enabled is None or now - self._enabled[0] > CACHE_TTL_S:
            # One question to the database, whatever the number of requests waiting for
            # it: under 50 concurrent clients every expiry sent 50 (~2% of an append's CPU).
            if self._asking is None:
                self._asking = asyncio.ensure_future(self._ask_enabled(now))
            return await asyncio.shield(self._asking)
        return self._enabled[1]

    async def _ask_enabled(self, now: float) -> bool:
        try:
            assert self.engine is not None
            # Once keyed, keyed until restarted: `contextd keys keyless` deleting every
            # key must not open a server that is listening beyond loopback now.
            found = await any_key(self.engine) or bool(self._enabled and self._enabled[1])
            self._enabled = (now, found)
            return found
        finally:
            self._asking = None

    async def tenant_for(self, key: str) -> str | None:
        digest = hash_key(key)
        for known, tenant in self.env_keys.items():
            if hmac.compare_digest(known, digest):
                return tenant
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] <= CACHE_TTL_S:
            return cached[1]
        asking = self._looking_up.get(digest)  # one look-up per key at a time, as above
        if asking is None:
            asking = self._looking_up[digest] = asyncio.ensure_future(self._look_up(digest, now))
        return await asyncio.shield(asking)

    async def _look_up(self, digest: str, now: float) -> str | None:
        try:
            assert self.engine is not None
            async with self.engine.connect() as conn:
                found: str | None = await conn.scalar(
                    select(ApiKeyRow.tenant_id).where(
                        ApiKeyRow.key_hash == digest, ApiKeyRow.revoked_at.is_(None)
                    )
                )
            if len(self._cache) > 10_000:  # wrong keys must not grow memory without bound
                self._cache.clear()
            self._cache[digest] = (now, found)
            return found
        finally:
            self._looking_up.pop(digest, None)
