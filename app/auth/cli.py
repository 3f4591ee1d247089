"""`contextd keys create | revoke | list | keyless`."""

from __future__ import annotations

import argparse
import asyncio

from app.auth.keys import (
    any_key,
    create_key,
    forget_all_keys,
    list_keys,
    parse_env_keys,
    revoke_key,
)
from app.core.settings import Settings
from app.db import engine as database


def keys_configured(settings: Settings, url: str) -> bool:
    # The keys the server will accept, not the variable's text: `CONTEXTD_API_KEYS=","`
    # holds none, and a server that took it for keys bound every interface, open.
    if settings.api_keys is not None and parse_env_keys(settings.api_keys.get_secret_value()):
        return True

    async def check() -> bool:
        engine = database.create_engine(url, pool_size=1)
        try:
            return await any_key(engine)
        finally:
            await engine.dispose()

    return asyncio.run(check())


def run_keys(url: str, args: argparse.Namespace, settings: Settings) -> int:
    if args.keys_command == "keyless":
        return asyncio.run(_keyless(url, args.yes, settings))
    return asyncio.run(_run(url, args))


async def _keyless(url: str, yes: bool, settings: Settings) -> int:
    """Back to keyless mode on purpose: revoking the last key locks everyone out (a
    revoked key still counts, so that no revocation opens a server), and this is the
    way back that keeps the data."""
    engine = database.create_engine(url, pool_size=1)
    factory = database.session_factory(engine)
    try:
        async with factory() as db, db.begin():
            rows = await list_keys(db)
            active = sum(1 for row in rows if row.revoked_at is None)
            if not yes:
                print(
                    f"This deletes all {len(rows)} API keys of this database ({active} active):"
                    " the next `contextd serve` starts without keys, on loopback only, and"
                    " every request is in the tenant `default` (sessions of other tenants"
                    " stay stored, out of reach until keys are back). Run it again with --yes."
                )
                return 1
            deleted, was_active = await forget_all_keys(db)
        print(
            f"deleted {deleted} keys ({was_active} active). Servers running now stay keyed"
            " until they restart."
        )
        if settings.api_keys is not None and parse_env_keys(settings.api_keys.get_secret_value()):
            print("CONTEXTD_API_KEYS is still set: the server stays keyed until it is unset.")
        return 0
    finally:
        await engine.dispose()


async def _run(url: str, args: argparse.Namespace) -> int:
    engine = database.create_engine(url, pool_size=1)
    factory = database.session_factory(engine)
    try:
        async with factory() as db, db.begin():
            if args.keys_command == "create":
                created = await create_key(db, args.tenant, args.name)
                print(f"id:     {created.id}\ntenant: {created.tenant}\nkey:    {created.key}")
                print("Store the key now: only its hash is kept.")
                return 0
            if args.keys_command == "revoke":
                if await revoke_key(db, args.key):
                    print("revoked")
                    return 0
                print("no active key with that id")
                return 1
            for row in await list_keys(db, args.tenant):
                state = f"revoked {row.revoked_at:%Y-%m-%d}" if row.revoked_at else "active"
                print(f"{row.id}\t{row.tenant_id}\t{row.name or ''}\t{state}")
            return 0
    finally:
        await engine.dispose()
