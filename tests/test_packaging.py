"""The project as a wheel: everything it needs at run time, migrations included."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import asyncpg
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_under_app_is_listed() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "app").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"
    assert listed - found == {"app.migrations", "app.migrations.versions"}


@pytest.mark.slow
async def test_an_installed_wheel_migrates_a_fresh_database(
    database_server: str, tmp_path: Path
) -> None:
    # Build from a copy, so the checkout gets no build/ folder.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("app", "migrations"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--target", str(target), str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # setuptools prints a banner per deprecated spelling (the license as a TOML table
    # gave four on every install); the build's own output shows under -v.
    banners = [ln for ln in (done.stdout + done.stderr).splitlines() if "deprecated" in ln]
    assert not banners, banners
    assert (target / "app" / "migrations" / "env.py").is_file()
    assert not (target / "migrations").exists()  # no top-level package of that name
    # The console's page and assets are package data, served from the installed package.
    static = target / "app" / "console" / "static"
    assert {"index.html", "console.js", "console.css", "favicon.svg"} <= {
        p.name for p in static.iterdir()
    }

    name = f"contextd_wheel_{uuid.uuid4().hex[:8]}"
    head, _, query = database_server.partition("?")
    url = f"{head.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")
    admin = await asyncpg.connect(database_server)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env |= {"PYTHONPATH": str(target), "CONTEXTD_DATABASE_URL": url}
        script = (
            "import sys, app, app.db; "
            "print(app.__file__); print(app.db.migrations_dir()); "
            "from app.cli import main; sys.exit(main(['migrate']))"
        )
        run = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", script],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        module, migrations = run.stdout.splitlines()[:2]
        assert module.startswith(str(target)) and migrations.startswith(str(target))
        conn = await asyncpg.connect(url)
        try:
            version = await conn.fetchval("SELECT version_num FROM alembic_version")
            tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables")}
        finally:
            await conn.close()
        from app.db import head_revision

        assert version == head_revision()
        assert {"sessions", "messages", "events", "compaction_jobs", "api_keys"} <= tables
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
