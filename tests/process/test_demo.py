"""`contextd demo` (`make demo`): the example agent against contextd and the packaged
scripted model, with no API key, as a newcomer runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.processes import REPO

pytestmark = pytest.mark.slow


def test_the_demo_runs_the_example_agent_with_no_key(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CONTEXTD_"))}
    env |= {"CONTEXTD_DATABASE_URL": database_url, "CONTEXTD_LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (REPO / "pyproject.toml").read_text().splitlines()
    out = done.stdout
    assert f"answer: The tool said: {len(lines)} lines in pyproject.toml" in out, out
    assert "the model was called 2 times" in out, out
    # contextd's log holds the whole step: the call and its result, then the answer.
    log = [line.split()[:3] for line in out.splitlines() if line.startswith("  seq ")]
    assert log == [
        ["seq", "1", "user"],
        ["seq", "2", "assistant"],
        ["seq", "3", "tool"],
        ["seq", "4", "assistant"],
    ], out
    assert "budget: ok" in out
    # The demo's own lines only: no log line of the service's start among them.
    assert not [line for line in out.splitlines() if line.startswith("{")], out


def test_the_demo_runs_on_a_server_with_keys(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CONTEXTD_"))}
    env |= {
        "CONTEXTD_DATABASE_URL": database_url,
        "CONTEXTD_LOG_FORMAT": "json",
        "CONTEXTD_API_KEYS": "demo-key-0123456789:demo",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "demo"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "answer: The tool said:" in done.stdout and "budget: ok" in done.stdout
