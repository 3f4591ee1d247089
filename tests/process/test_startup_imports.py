"""What a serving process imports to start: not the `mcp` SDK nor `openai` (app/api/mcp.py,
app/compaction/model_client.py), a second of CPU each that every `--workers` child would pay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from app.main import create_app
from app.core.settings import load_settings
app = create_app(load_settings(database_url=None, llm_base_url=None), database_url="postgresql://x/y")
heavy = sorted(m for m in ("mcp", "openai", "alembic") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_an_app_is_built_without_the_mcp_sdk_openai_or_alembic() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "none", out.stderr
