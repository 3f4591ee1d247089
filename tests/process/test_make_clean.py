"""`make clean`: stops the embedded PostgreSQL before deleting its files, refuses while
it runs and .venv is gone, and deletes nothing outside the repository's own folder.

Run on a copy of the Makefile: in the checkout it would delete the .venv running the
tests. The copy's `.venv/bin/python` is this interpreter and its `app` the checkout's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.db.embedded import is_running, start_embedded, stop_embedded
from tests.support.processes import REPO

pytestmark = pytest.mark.slow

# What `make clean` removes, so that each is shown gone in the copy and kept outside it.
CLEANED = [".venv", ".contextd", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"]


def _copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "Makefile", repo / "Makefile")
    (repo / "app").symlink_to(REPO / "app", target_is_directory=True)
    return repo


def _venv(repo: Path) -> None:
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)


def _bystanders(folder: Path) -> list[Path]:
    """A file in each folder `make clean` would remove, had it the same name here."""
    kept = []
    for name in CLEANED:
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "keep").write_text("not the repository's")
        kept.append(folder / name / "keep")
    return kept


def _postmaster(data: Path) -> int:
    return int((data / "pgdata" / "postmaster.pid").read_text().split()[0])


def _alive(pid: int) -> bool:
    """Running (a zombie is not: a container's init may never reap the stopped postmaster)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def _make(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    return subprocess.run(
        ["make", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180,
        check=False,
    )  # fmt: skip


def test_clean_stops_the_embedded_postgres_then_removes_only_the_repositorys_files(
    tmp_path: Path,
) -> None:
    repo = _copy(tmp_path)
    _venv(repo)
    data = repo / ".contextd"
    start_embedded(data)
    try:
        pid = _postmaster(data)
        assert is_running(data) and _alive(pid)
        outside = tmp_path / "elsewhere"
        kept = _bystanders(outside)
        (repo / ".pytest_cache").mkdir()
        # Called from another folder, with the venv's name pointed outside: neither moves it.
        done = _make(
            "-f", str(repo / "Makefile"), "clean", f"VENV={outside / '.venv'}", cwd=outside
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert not _alive(pid), "the server was not stopped"
        assert not any((repo / name).exists() for name in CLEANED)
        assert (repo / "Makefile").is_file() and (REPO / "app" / "main.py").is_file()
        assert all(p.read_text() == "not the repository's" for p in kept)
    finally:
        if is_running(data):
            stop_embedded(data)


def test_clean_refuses_while_the_server_runs_and_the_venv_is_gone(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    data = repo / ".contextd"
    start_embedded(data)
    try:
        pid = _postmaster(data)
        done = _make("-C", str(repo), "clean", cwd=tmp_path)
        assert done.returncode != 0
        assert "running and .venv is gone: stop it first" in done.stderr
        assert _alive(pid) and (data / "pgdata" / "PG_VERSION").is_file()
    finally:
        stop_embedded(data)
    # Stopped, the same command goes through.
    assert not _alive(pid)
    done = _make("-C", str(repo), "clean", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not data.exists()
