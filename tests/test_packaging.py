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


def test_every_folder_under_app_is_listed() -> None:
    # Data folders (the console's static/, the migrations) too: setuptools warns on every
    # install about a folder it finds importable and not listed.
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.relative_to(ROOT).parts)
        for p in [ROOT / "app", *(ROOT / "app").rglob("*")]
        if p.is_dir() and p.name != "__pycache__"
    }
    assert found == listed


def _copy_project(dest: Path) -> Path:
    """What a build reads, copied: building in the checkout would leave build/ there."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "app", dest / "app", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _banners(output: str) -> list[str]:
    """setuptools' warnings, which pip prints even under --quiet: a deprecated spelling
    (the license as a TOML table gave four), an unlisted folder, an editable layout it
    cannot map to a path entry."""
    words = ("deprecated", "Warning:", "absent from the `packages`", "Editable installation")
    return [ln for ln in output.splitlines() if any(w in ln for w in words)]


@pytest.mark.slow
def test_an_editable_install_prints_no_banner(tmp_path: Path) -> None:
    # `make`'s own install (pip install -e) into a venv of its own, with the pip here; no
    # dependencies: the package itself is what is built.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    src = _copy_project(tmp_path / "src")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
         "install", "--no-deps", "-e", str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _banners(done.stdout + done.stderr) == []
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import app.db.migrations as m; print(*m.__path__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert found.stdout.strip() == str(src / "app" / "db" / "migrations"), found.stderr


@pytest.mark.slow
async def test_an_installed_wheel_migrates_a_fresh_database(
    database_server: str, tmp_path: Path
) -> None:
    src = _copy_project(tmp_path / "src")
    target = tmp_path / "site"
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--target", str(target), str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _banners(done.stdout + done.stderr) == []
    assert (target / "app" / "db" / "migrations" / "env.py").is_file()
    assert (target / "app" / "db" / "migrations" / "script.py.mako").is_file()
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
            "import sys, app, app.db.migrate; "
            "print(app.__file__); print(app.db.migrate.migrations_dir()); "
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
        from app.db.migrate import head_revision

        assert version == head_revision()
        assert {"sessions", "messages", "events", "compaction_jobs", "api_keys"} <= tables
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
