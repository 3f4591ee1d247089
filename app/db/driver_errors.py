"""Which driver errors mean "the database is away" and which "PostgreSQL rolled the
transaction back": both are answered 503, and the request may be sent again."""

from __future__ import annotations


def _unavailable_classes() -> tuple[type[Exception], ...]:
    import asyncpg
    from sqlalchemy import exc as sa_exc

    return (
        sa_exc.SQLAlchemyError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        OSError,
        TimeoutError,
    )


# Error classes that may mean "the database is away"; `is_unavailable` decides.
UNAVAILABLE_CLASSES = _unavailable_classes()


def _driver_error(exc: BaseException) -> BaseException:
    """The asyncpg error under SQLAlchemy's wrapping (`orig`, then one `__cause__`)."""
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.DBAPIError):
        exc = exc.orig if exc.orig is not None else exc
        exc = getattr(exc, "__cause__", None) or exc
    return exc


def is_rolled_back(exc: BaseException) -> bool:
    """True when PostgreSQL rolled the transaction back to break a conflict (deadlock,
    serialization failure): nothing was written and the same request may be retried."""
    import asyncpg

    return isinstance(_driver_error(exc), asyncpg.TransactionRollbackError)


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "the database is away", which clients should retry (503)."""
    import asyncpg
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.TimeoutError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        _driver_error(exc),
        asyncpg.PostgresConnectionError
        | asyncpg.CannotConnectNowError
        | asyncpg.InternalClientError
        | asyncpg.AdminShutdownError
        | asyncpg.InterfaceError
        | ConnectionError
        | OSError,
    )
