"""Compaction: fold old turns into a structured rolling summary (SPEC §5).

Pure planning and summarising (`turns.py`, `brief.py`, `fit.py`, `engine.py` and the
modules they read) under the job table, runner, fenced store and HTTP endpoints that
build on them; docs/architecture.md has the map.
"""
