"""bench/vector_bench.py times both ways over the same messages and checks their bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import vector_bench
from tests.support.compaction_builders import dataset_sessions


def test_the_bench_compares_c_and_python_on_the_same_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sessions = dataset_sessions()
    # One session of Chinese dialogue (long tokens) and one agent trace.
    picked = [s for s in sessions if "的" in json.dumps(s, ensure_ascii=False)][:1]
    picked += [s for s in sessions if any(m.get("tool_calls") for m in s["messages"])][:1]
    path = tmp_path / "sample.jsonl"
    path.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in picked))
    monkeypatch.setattr("sys.argv", ["vector_bench", "--rounds", "1", "--dataset", str(path)])
    assert vector_bench.main() == 0
    out = capsys.readouterr().out
    count = sum(len(s["messages"]) for s in picked)
    assert f"| all | {count:,} |" in out
    assert "| with a long token | 0 |" not in out, "the sample holds no long token"
    assert "the same bytes both ways: yes" in out
