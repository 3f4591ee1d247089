"""The noop's sentence counts the turns the tail really holds, and says what `force`
does not do (it skips the guards; it keeps the preserved tail)."""

from __future__ import annotations

from app.compaction.turns import NoopReason, plan_range
from tests.support.compaction_builders import chat


def test_a_short_session_noop_names_the_turns_it_has_not_the_setting() -> None:
    log = chat([("q1", "a1"), ("q2", "a2")])
    noop = plan_range(log, watermark=0, min_preserved_turns=8, force=True)
    assert isinstance(noop, NoopReason) and noop.code == "nothing_compressible"
    assert "the current turn and 1 earlier turn," in noop.detail, noop.detail
    assert "the 8 before it" not in noop.detail
    assert "min_preserved_turns (0 keeps only the current turn)" in noop.detail
    three = plan_range(
        chat([("q1", "a1"), ("q2", "a2"), ("q3", "a3")]), watermark=0, min_preserved_turns=8
    )
    assert isinstance(three, NoopReason) and "2 earlier turns," in three.detail


def test_the_recipe_the_sentence_gives_compacts() -> None:
    log = chat([("q1", "a1"), ("q2", "a2")])
    plan = plan_range(log, watermark=0, min_preserved_turns=0, force=True)
    assert not isinstance(plan, NoopReason), plan
    assert plan.new_watermark == 2
