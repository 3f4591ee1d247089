"""The command line's argument types and what its messages show of a database URL."""

from __future__ import annotations

import argparse

# A tenant's name, as `contextd keys create --tenant` takes it.
TENANT_MAX = 128


def redacted(url: str) -> str:
    """The URL without its password, fit for a message."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL (the embedded server's name): as it is
        return url


def _whole(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None


def port(value: str) -> int:
    # 0 is the kernel's choice of a free port: a test harness that picks one first and
    # passes it on races every other process picking ports until the server binds it.
    n = _whole(value)
    if not 0 <= n < 65536:
        raise argparse.ArgumentTypeError("must be 0 (any free port) to 65535")
    return n


def positive(value: str) -> int:
    n = _whole(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def tenant(value: str) -> str:
    # An empty name would be read as no tenant, that is `default`: another tenant's data.
    if not value.strip() or value != value.strip() or len(value) > TENANT_MAX:
        raise argparse.ArgumentTypeError(
            f"a tenant is a name of 1 to {TENANT_MAX} characters without surrounding spaces"
        )
    return value
