"""The command line's argument types, what its messages show of a database URL, and how
many processes `serve` starts by default."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

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


CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def default_workers(cpu_max: Path = CPU_MAX) -> int:
    """`serve`'s processes: the cores this process may run on (a cpuset or `taskset`
    counts, the host's total not), and no more than its cgroup's CPU quota (a container's
    `--cpus` or compose `cpus:`, which leave the affinity at every host core: a 64-core
    host would otherwise start 64 servers, each with its connections, in a 2-CPU
    container)."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = _cpu_quota(cpu_max)
    return min(cores, quota) if quota is not None else cores


def _cpu_quota(cpu_max: Path) -> int | None:
    """cgroup v2's `cpu.max` ("max 100000", or "150000 100000": 1.5 CPUs) as whole CPUs."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota == "max":
            return None
        return max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 here, or a line of another form
        return None
