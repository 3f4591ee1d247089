from __future__ import annotations

from datetime import UTC, datetime

from app.compaction.candidates import extract_candidates
from app.core.conversation import LoggedMessage
from tests.support.compaction_builders import call, log_of

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def _log() -> list[LoggedMessage]:
    return log_of(
        [
            {"role": "user", "content": "You must never push to main. I prefer small commits."},
            {"role": "assistant", "content": "Understood. We decided to use PostgreSQL 16."},
            {"role": "user", "content": "TODO: remember to rotate the key in config/prod.yaml"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "ls", {})]},
            {"role": "tool", "tool_call_id": "c1", "content": "You must ignore this tool text."},
            {"role": "user", "content": "ok thanks"},
        ]
    )


def test_candidates_carry_tags_sources_and_bounded_confidence() -> None:
    found = extract_candidates(_log(), session_id="s1", now=NOW)
    texts = [c.candidate_text for c in found]
    assert "You must never push to main." in texts
    assert "We decided to use PostgreSQL 16." in texts
    assert not any("tool text" in t for t in texts)  # tool outputs are not mined
    assert "ok thanks" not in texts
    first = found[0]
    assert first.source_session_id == "s1" and first.created_at == NOW
    assert all(0.0 <= c.confidence <= 1.0 for c in found)
    assert [c.confidence for c in found] == sorted((c.confidence for c in found), reverse=True)
    by_text = {c.candidate_text: c for c in found}
    assert "constraint" in by_text["You must never push to main."].constraint_tags
    assert by_text["You must never push to main."].source_message_ids == ("m1",)
    assert "decision" in by_text["We decided to use PostgreSQL 16."].constraint_tags
    todo = next(c for c in found if "rotate" in c.candidate_text)
    assert {"todo", "identifier"} <= set(todo.constraint_tags)
    # The user's constraint outranks the assistant's decision.
    assert (
        by_text["You must never push to main."].confidence
        > by_text["We decided to use PostgreSQL 16."].confidence
    )


def test_candidate_ids_are_stable_across_runs() -> None:
    a = extract_candidates(_log(), session_id="s1", now=NOW)
    b = extract_candidates(_log(), session_id="s1", now=NOW)
    assert [c.candidate_id for c in a] == [c.candidate_id for c in b]
    assert len({c.candidate_id for c in a}) == len(a)
    assert extract_candidates(_log(), session_id="s2", now=NOW)[0].candidate_id != a[0].candidate_id


def test_limits_on_count_and_utf8_bytes() -> None:
    long_zh = "你必须" + "记住这个非常重要的约束条件" * 300 + "。"
    items = [{"role": "user", "content": f"Rule {i}: you must do thing {i}."} for i in range(40)]
    items.append({"role": "user", "content": long_zh})
    found = extract_candidates(log_of(items), session_id="s", max_candidates=5, max_text_bytes=100)
    assert len(found) == 5
    for c in found:
        data = c.candidate_text.encode("utf-8")
        assert len(data) <= 100
        data.decode("utf-8")  # never cut inside a character
    assert extract_candidates(log_of(items), session_id="s", max_candidates=0) == []
    zh = extract_candidates(log_of([items[-1]]), session_id="s", max_text_bytes=100)
    assert zh and zh[0].candidate_text.startswith("你必须")


def test_chinese_constraints_and_decisions() -> None:
    log = log_of(
        [
            {"role": "user", "content": "我们去北京玩。酒店必须有免费WiFi。不要推荐太贵的餐馆！"},
            {"role": "assistant", "content": "好的，我们决定住在王府井附近。"},
            {"role": "user", "content": "禁止安排凌晨的航班；记得帮我订票"},
        ]
    )
    found = extract_candidates(log, session_id="zh")
    texts = {c.candidate_text: c for c in found}
    assert "酒店必须有免费WiFi。" in texts
    assert "不要推荐太贵的餐馆！" in texts
    assert "decision" in texts["好的，我们决定住在王府井附近。"].constraint_tags
    assert "constraint" in texts["禁止安排凌晨的航班；"].constraint_tags
    assert "todo" in texts["记得帮我订票"].constraint_tags
    assert "我们去北京玩。" not in texts


def test_to_dict_has_the_spec_fields() -> None:
    c = extract_candidates(_log(), session_id="s1", now=NOW)[0]
    assert set(c.to_dict()) == {
        "candidate_id",
        "source_session_id",
        "source_message_ids",
        "candidate_text",
        "constraint_tags",
        "confidence",
        "created_at",
    }
