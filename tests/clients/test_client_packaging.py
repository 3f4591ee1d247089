"""`pip install ./clients/python`: a distribution of its own, needing httpx and pydantic only."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python"


@pytest.mark.slow
async def test_the_client_installs_alone_and_imports_no_framework(tmp_path: Path) -> None:
    src = tmp_path / "src"  # build from a copy, so the checkout gets no build/ folder
    shutil.copytree(
        CLIENT, src, ignore=shutil.ignore_patterns("__pycache__", "tests", "*.egg-info")
    )
    venv = tmp_path / "venv"
    made = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    # No download in a test: the dependencies are checked in the metadata, and the
    # import below borrows them from this interpreter, after the fresh venv's own paths.
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    package = site / "contextd_client"
    assert (package / "py.typed").is_file() and (package / "agents.py").is_file()

    meta = Parser().parsestr(next(site.glob("contextd_client-*.dist-info/METADATA")).read_text())
    requires = meta.get_all("Requires-Dist") or []
    core = sorted(r.split(">")[0].split("=")[0].strip() for r in requires if "extra ==" not in r)
    assert core == ["httpx", "pydantic"]
    assert set(meta.get_all("Provides-Extra") or []) == {"agents", "langchain"}

    borrowed = [p for p in sys.path if p.endswith("site-packages")]
    script = (
        "import sys; sys.path += " + repr(borrowed) + "\n"
        "import contextd_client as c\n"
        "print(c.__file__)\n"
        "heavy = {'agents', 'langchain', 'langchain_core', 'openai', 'app'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "assert c.ContextdClient('http://x').retry.max_retries == 3\n"
    )
    run = await asyncio.to_thread(
        subprocess.run, [str(python), "-c", script], cwd=tmp_path,
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().startswith(str(site))
