"""tsvector in PostgreSQL's binary form, both ways: the codec every engine registers."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


def binary_tsvector(engine: AsyncEngine) -> None:
    """tsvector goes both ways in PostgreSQL's binary form on every connection.

    The append sends each message's search vector made ready (app/index/vector.py):
    PostgreSQL reads the binary form without parsing it, where the text form
    (`'a':1 'b':2,5`) cost about as much of its CPU as storing and indexing the row.
    A tsvector read back comes as the text PostgreSQL would have sent.
    """

    @event.listens_for(engine.sync_engine, "connect")
    def _connected(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.run_async(
            lambda conn: conn.set_type_codec(
                "tsvector",
                schema="pg_catalog",
                encoder=_as_is,
                decoder=tsvector_text,
                format="binary",
            )
        )


def _as_is(data: bytes) -> bytes:
    return data


_WEIGHTS = ("", "C", "B", "A")


def tsvector_text(data: bytes) -> str:
    """A tsvector's binary form (tsvectorsend) as PostgreSQL's text form (tsvectorout):
    `'lexeme':1,5B 'other'`, quotes and backslashes doubled."""
    count = int.from_bytes(data[:4], "big")
    at = 4
    out: list[str] = []
    for _ in range(count):
        end = data.index(b"\0", at)
        lexeme = data[at:end].decode().replace("'", "''").replace("\\", "\\\\")
        n = int.from_bytes(data[end + 1 : end + 3], "big")
        at = end + 3
        if n:
            words = [int.from_bytes(data[i : i + 2], "big") for i in range(at, at + 2 * n, 2)]
            at += 2 * n
            positions = ",".join(f"{w & 0x3FFF}{_WEIGHTS[w >> 14]}" for w in words)
            out.append(f"'{lexeme}':{positions}")
        else:
            out.append(f"'{lexeme}'")
    return " ".join(out)
