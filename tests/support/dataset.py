"""Where the shared dataset of real conversations is: `../shared/datasets` beside the
clone, as CI has it, or wherever `CONTEXTD_DATASET` names (a worktree elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

DATASET = Path(
    os.environ.get("CONTEXTD_DATASET")
    or Path(__file__).resolve().parents[2].parent / "shared" / "datasets" / "sessions.jsonl"
)
