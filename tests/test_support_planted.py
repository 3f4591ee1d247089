"""The planted instructions of tests/support/planted.py are fair: no detector word in them."""

from __future__ import annotations

import re

from app.compaction import signals as compaction_signals
from app.context import scoring as context_signals
from app.core import words
from tests.support.context_builders import assistant, load_sessions, tool, user
from tests.support.planted import (
    INSTRUCTIONS,
    LANGS,
    by_lang,
    normalise,
    plant,
    step_boundaries,
)

_WORD = re.compile(r"[^\W\d_]+")


def _detector_words() -> tuple[set[str], set[str]]:
    """Every Latin word and every Chinese term in the detectors' word lists (`app/core/words.py`,
    which both `app/context/scoring.py` and `app/compaction/signals.py` use)."""
    latin: set[str] = set()
    for phrases in words.LATIN.values():
        for phrase in phrases:
            latin.update(_WORD.findall(phrase))
    cjk = {term for terms in words.CJK.values() for term in terms}
    return latin, cjk


def test_both_detectors_use_the_one_word_list() -> None:
    for name in ("constraint", "decision"):
        for phrase in (*words.LATIN[name], *words.CJK[name]):
            text = f"So: {phrase} it."
            assert name in context_signals.found(text), (name, phrase)
            assert name in compaction_signals.classify(text), (name, phrase)
    for name in ("preference", "todo"):
        for phrase in (*words.LATIN[name], *words.CJK[name]):
            assert name in compaction_signals.classify(f"So: {phrase} it."), (name, phrase)


def test_planted_phrasings_share_no_word_with_any_detector() -> None:
    words, cjk = _detector_words()
    assert {"must", "never", "prefer", "remember", "decided", "the", "use"} <= words
    assert {"必须", "需要", "希望", "记得", "决定"} <= cjk
    for ins in INSTRUCTIONS:
        shared = set(_WORD.findall(ins.text.lower())) & words
        assert not shared, (ins.key, shared)
        assert not [t for t in cjk if t in ins.text], ins.key


def test_detectors_see_nothing_in_planted_phrasings() -> None:
    durable = {"constraint", "decision", "preference", "todo"}
    for ins in INSTRUCTIONS:
        assert not {"constraint", "decision"} & set(context_signals.found(ins.text)), ins.key
        for sentence in compaction_signals.split_sentences(ins.text):
            assert not durable & compaction_signals.classify(sentence), ins.key


def test_at_least_three_languages_with_distinct_markers() -> None:
    assert len(LANGS) >= 3 and "en" in LANGS and "zh" in LANGS
    for lang in LANGS:
        assert len(by_lang(lang)) >= 5, lang
    markers = [normalise(i.marker) for i in INSTRUCTIONS]
    assert len(set(markers)) == len(markers)
    for ins in INSTRUCTIONS:
        assert ins.visible_in([ins.message()])
        others = [o.message() for o in INSTRUCTIONS if o is not ins]
        assert not ins.visible_in(others), ins.key


def test_markers_do_not_occur_in_the_dataset() -> None:
    text = normalise(" ".join(str(s) for s in load_sessions()))
    assert [i.key for i in INSTRUCTIONS if normalise(i.marker) in text] == []


def agent_run() -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [user("Fix the bug.")]
    for i in range(8):
        msgs += [assistant(f"step {i}", f"a{i}", f"b{i}"), tool(f"a{i}", "ok"), tool(f"b{i}", "ok")]
    msgs.append(assistant("Done."))
    return msgs


def test_plant_goes_between_tool_steps_never_inside_a_group() -> None:
    msgs = agent_run()
    bounds = step_boundaries(msgs)
    assert bounds == [1 + 3 * i for i in range(1, 9)]  # before each later step and the answer
    out, planted = plant(msgs, 4, at=(0.1, 0.3, 0.6, 0.9))
    assert len(planted) == 4 and len(out) == len(msgs) + 4
    assert [p.instruction.lang for p in planted] == list(LANGS[:4])
    for p in planted:
        assert out[p.index] == p.instruction.message()
        assert out[p.index - 1]["role"] == "tool" and out[p.index + 1]["role"] == "assistant"
    # The rest of the run is unchanged, in order.
    rest = [m for i, m in enumerate(out) if i not in {p.index for p in planted}]
    assert rest == msgs


def test_plant_until_keeps_instructions_before_a_position() -> None:
    msgs = agent_run()
    out, planted = plant(msgs, 3, until=14)  # boundaries 4, 7, 10, 13
    # Aimed at 1/4, 2/4, 3/4 of the run: 7, 13, and the last free one left (10).
    assert [p.index for p in planted] == [7, 11, 15]
    assert all(out[p.index]["role"] == "user" for p in planted)
    assert plant(msgs, 5, until=8)[1] == [  # fewer boundaries than asked for
        p for p in plant(msgs, 2, until=8)[1]
    ]
