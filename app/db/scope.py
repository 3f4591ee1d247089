"""Tenant scoping, written once: every statement's `(tenant_id, session_id)` filter.

Every table is keyed by `(tenant_id, session_id)` (`sessions` by `(tenant_id, id)`), and
every statement of a session names both, so that a table spread by session routes it to
one partition (tests/db/test_partitioned.py). Repositories build the filter here and
nowhere else; tests/test_tenant_scope.py fails on one written by hand.

Two forms, one rule:

- SQLAlchemy expressions: `of_session(MessageRow, tenant, sid)`, `of_tenant(...)` for a
  tenant's listings, `of_sessions(table, keys)` for a batch of several sessions' rows,
  `same_session(a, b)` for a join of two tables on the key;
- raw SQL texts (asyncpg's `$n`, `text()`'s `:name`): `session_sql("m")` is
  `m.tenant_id = $1 AND m.session_id = $2`, assembled into the statement when its module
  is imported: a statement's text never varies, and prepared statements and their generic
  plans are cached by text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, and_, tuple_

from app.db.models import SessionRow


def _session_column(table: Any) -> Any:
    # `sessions` is the one table whose own id is the session's; any other table without
    # a `session_id` is not keyed by session and has no place here (AttributeError).
    return table.id if table is SessionRow else table.session_id


def of_session(table: Any, tenant: Any, sid: Any) -> ColumnElement[bool]:
    """`table`'s rows of one session: tenant and session, both, for every statement.

    `table` is a mapped class; `tenant` and `sid` are values, bound parameters or
    columns (a correlation)."""
    return and_(table.tenant_id == tenant, _session_column(table) == sid)


def of_tenant(table: Any, tenant: Any) -> ColumnElement[bool]:
    """`table`'s rows of one tenant, any session: listings and tenant-wide counts only."""
    result: ColumnElement[bool] = table.tenant_id == tenant
    return result


def of_sessions(table: Any, keys: Iterable[tuple[str, str]]) -> ColumnElement[bool]:
    """`table`'s rows of any of several sessions, each a `(tenant, session id)` pair."""
    result: ColumnElement[bool] = tuple_(table.tenant_id, _session_column(table)).in_(keys)
    return result


def same_session(table: Any, other: Any) -> ColumnElement[bool]:
    """A join's condition: `table`'s rows of the session of `other`'s row."""
    return of_session(table, other.tenant_id, _session_column(other))


def session_sql(alias: str = "", tenant: str = "$1", sid: str = "$2") -> str:
    """The session filter in SQL text: `alias.tenant_id = $1 AND alias.session_id = $2`.

    `tenant` and `sid` are what the columns equal (parameters such as `:tenant`, or
    another table's columns); no alias, bare column names."""
    a = f"{alias}." if alias else ""
    return f"{a}tenant_id = {tenant} AND {a}session_id = {sid}"


def session_row_sql(alias: str = "", tenant: str = "$1", sid: str = "$2") -> str:
    """`session_sql` for the `sessions` table itself, whose key column is `id`."""
    a = f"{alias}." if alias else ""
    return f"{a}tenant_id = {tenant} AND {a}id = {sid}"


def tenant_sql(alias: str = "", tenant: str = "$1") -> str:
    """The tenant filter alone in SQL text: listings and tenant-wide counts only."""
    a = f"{alias}." if alias else ""
    return f"{a}tenant_id = {tenant}"
