"""The model bench's tabulation of the gate (bench/model_bench.py), on hand-made jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.model_bench import (
    Run,
    Step,
    gate_counts,
    gate_report,
    invented,
    load,
    report,
    save,
)


def probe(kind: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "text": text, "seqs": [3], **extra}


def gate(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "version": 1, "probes": {}, "scores": {}, "answer_scores": {}, "dropped": [],
        "caught": [], "action": "none", "citations": {"kept": 0, "corrected": 0, "dropped": 0},
    }  # fmt: skip
    return {**base, **fields}


def runs() -> list[Run]:
    patched = gate(
        probes={"constraint": 4, "artifact": 2},
        answer_scores={"constraint": 0.25, "artifact": 0.0},
        scores={"constraint": 1.0, "artifact": 0.5},
        caught=[probe("constraint", "use tabs", by="patch"),
                probe("constraint", "no network", by="retry"),
                probe("constraint", "keep ids", by="patch"),
                probe("artifact", "read app/x.py", by="patch")],
        dropped=[probe("artifact", "ran make", over_share=True)],
        action="patch",
        citations={"kept": 2, "corrected": 1, "dropped": 5, "unsupported": 4, "echo": 1,
                   "dropped_items": [{"text": "10.0", "reason": "unsupported",
                                      "missing": ["10.0"]}]},
    )  # fmt: skip
    fallback = gate(
        probes={"constraint": 1, "error": 1},
        answer_scores={"constraint": 0.0, "error": 0.0},
        scores={"constraint": 1.0, "error": 0.0},
        caught=[probe("constraint", "be brief", by="extractive")],
        dropped=[probe("error", "E42 in build")],
        action="extractive",
    )  # fmt: skip
    one = Run("s1", "swe-agent")
    one.steps = [
        Step(1, "success", None, "model", 20.0, gate=patched),
        Step(2, "degraded", "gate_dropped", "extractive", 30.0, gate=fallback),
    ]
    two = Run("s2", "tau-bench")
    two.steps = [Step(1, "noop", "nothing_compressible", None, 0.0)]
    return [one, two]


def test_gate_counts_sum_each_kind_over_the_jobs() -> None:
    counts = gate_counts(runs()[0].steps)
    assert counts["constraint"] == {
        "probes": 5, "answer": 1, "stored": 5, "by_patch": 2, "by_retry": 1, "by_extractive": 1,
    }  # fmt: skip
    assert counts["artifact"] == {
        "probes": 2, "answer": 0, "stored": 1, "by_patch": 1, "dropped": 1, "over_share": 1,
    }  # fmt: skip
    assert counts["error"] == {"probes": 1, "answer": 0, "stored": 0, "dropped": 1, "over_share": 0}
    assert counts["decision"] == {}


def row(text: str, kind: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith(f"| {kind} "))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_gate_report_per_compaction_keeps_statuses_and_noops() -> None:
    text = "\n".join(gate_report(runs(), 3))
    first, second = text.split("Gate, compaction 2")
    assert "compaction 3" not in text  # no job at k=3: no table
    assert "2 jobs (1 with a `gate`): success 1, degraded 0" in first
    assert "noop 1" in first
    assert "gate action patch ×1" in first
    assert "citation kept 2, corrected 1, dropped 5 (unsupported 4, echo 1)" in first
    assert row(first, "constraint") == [
        "constraint", "4", "25% (1/4)", "100% (4/4)", "1 / 2 / 0", "0 (0 over share)",
    ]  # fmt: skip
    assert row(first, "artifact") == [
        "artifact", "2", "0% (0/2)", "50% (1/2)", "0 / 1 / 0", "1 (1 over share)",
    ]  # fmt: skip
    assert row(first, "decision")[1:4] == ["0", "-", "-"]
    assert "degraded 1 (of which `gate_dropped` 1, `invented` 0)" in second
    assert "gate action extractive ×1" in second
    assert row(second, "constraint")[2:5] == ["0% (0/1)", "100% (1/1)", "0 / 0 / 1"]
    assert row(second, "error")[3:] == ["0% (0/1)", "0 / 0 / 0", "1 (0 over share)"]


def test_a_dump_reads_back_to_the_same_report(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    save(runs(), path)
    again = load(path)
    assert again == runs()
    assert report(again, 3) == report(runs(), 3)
    assert "read from each job's `gate` field" in report(again, 3)
    # What the gate dropped from the answers, with what nothing held.
    assert "- unsupported: s1 k=1: '10.0' (missing ['10.0'])" in report(again, 3)


def test_invented_items_are_those_the_range_lacks_and_stored_those_still_summary_lines() -> None:
    answer = (
        'Here: {"facts": ["1.3", "4.5", "ran pytest tests/test_x.py [#4]", "I will help you out!"],'
        ' "decisions": [], "timeline": "x"}'
    )
    range_text = "assistant: ran pytest tests/test_x.py\ntool: 2 passed in 1.30s"
    summary = "## Facts\n- ran pytest tests/test_x.py [#4]\n- I will help you out! [#4]\n- 1.30"
    made, stored = invented([answer, "not json"], range_text, summary)
    assert made == ["4.5", "I will help you out!"]  # "1.3" is in "1.30": held verbatim
    assert stored == ["I will help you out!"]
