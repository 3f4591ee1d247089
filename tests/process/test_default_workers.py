"""`serve`'s default process count: the cores it may use, within its cgroup's CPU quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.cli_args import default_workers

CORES = len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    "cpu_max,expected",
    [
        ("max 100000\n", CORES),  # no quota
        ("100000 100000\n", 1),
        ("150000 100000\n", min(CORES, 2)),  # 1.5 CPUs: two processes, not one
        ("50000 100000\n", 1),
        ("6400000 100000\n", CORES),  # a quota above the cores: the cores
        ("garbage\n", CORES),
    ],
)
def test_the_quota_caps_the_cores(tmp_path: Path, cpu_max: str, expected: int) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(cpu_max)
    assert default_workers(path) == expected


def test_without_cgroup_v2_the_cores_decide(tmp_path: Path) -> None:
    assert default_workers(tmp_path / "absent") == CORES
