"""The verbatim `user_messages` section: what folds first once over its share (SPEC §5)."""

from __future__ import annotations

from app.compaction.user_messages import range_user_messages, roll_user_messages
from tests.support.compaction_builders import COUNTER, msg
from tests.support.planted import INSTRUCTIONS

LONG = "Here is the full log I promised, read it all: " + "trace line ok " * 120


def test_below_the_share_every_message_is_kept_verbatim_in_order() -> None:
    texts = [i.text for i in INSTRUCTIONS]
    kept, folded = roll_user_messages(texts[:10], texts[10:], max_tokens=10_000, counter=COUNTER)
    assert kept == tuple(texts) and folded == ()


def test_over_the_share_long_ones_fold_first_then_the_oldest_short_ones() -> None:
    short = [i.text for i in INSTRUCTIONS[:6]]
    previous = [short[0], LONG, short[1]]
    new = [LONG + " (second)", short[2], *short[3:]]
    cost = sum(COUNTER.count_text(t) + 2 for t in short)
    kept, folded = roll_user_messages(previous, new, max_tokens=cost, counter=COUNTER)
    assert kept == tuple(short) and set(folded) == {LONG, LONG + " (second)"}
    # Tighter still: the oldest short instructions go, the newest stay.
    kept, _ = roll_user_messages(previous, new, max_tokens=cost // 2, counter=COUNTER)
    assert kept == tuple(short[-len(kept) :]) and 0 < len(kept) < len(short)


def test_a_repeated_message_is_kept_once_at_its_latest_place() -> None:
    kept, _ = roll_user_messages(["a", "b"], ["a"], max_tokens=100, counter=COUNTER)
    assert kept == ("b", "a")


def test_range_user_messages_skip_pinned_ui_only_and_other_roles() -> None:
    log = [
        msg(1, "user", "keep me"),
        msg(2, "user", "pinned", pinned=True),
        msg(3, "user", "ui only", include_in_context=False),
        msg(4, "assistant", "not the user"),
        msg(5, "user", "我的电脑是 Windows 11"),
    ]
    assert range_user_messages(log) == ("keep me [#1]", "我的电脑是 Windows 11 [#5]")


def test_answered_questions_fold_before_short_instructions() -> None:
    instruction = INSTRUCTIONS[0].text  # planted: shares no word with the detector
    questions = [f"What does module m{i} do?" for i in range(6)]
    cost = COUNTER.count_text(instruction) + 2 + 2 * (COUNTER.count_text(questions[0]) + 2)
    kept, folded = roll_user_messages([instruction], questions, max_tokens=cost, counter=COUNTER)
    assert kept[0] == instruction and set(folded) <= set(questions) and len(folded) >= 4
    assert kept[1:] == tuple(questions[-len(kept) + 1 :])  # the newest questions stay


# A task description of an agent run: long, and it says "must" (the tagger calls it a constraint).
TASK = (
    "Fix the parser. You must keep the public API unchanged.\n" + "Context line of the task.\n" * 60
)


def test_a_message_larger_than_the_share_folds_alone_and_the_older_short_ones_stay() -> None:
    # The defect of a rolling compaction: the newest message alone exceeded the share,
    # everything older was folded oldest first, then it too, and the section came out empty.
    short = [i.text for i in INSTRUCTIONS[:3]]
    share = sum(COUNTER.count_text(t) + 2 for t in short) + 40
    assert COUNTER.count_text(TASK) > share
    kept, folded = roll_user_messages(short, [TASK], max_tokens=share, counter=COUNTER)
    assert kept == tuple(short) and folded == (TASK,)
    # The same with nothing new in the range: a previous section over the share now.
    kept, folded = roll_user_messages([*short, TASK], [], max_tokens=share, counter=COUNTER)
    assert kept == tuple(short) and folded == (TASK,)


def test_long_messages_that_say_must_fold_before_short_instructions() -> None:
    short = [i.text for i in INSTRUCTIONS[:3]]
    task = TASK[:600]  # long, tagged, and within the share on its own
    share = COUNTER.count_text(task) + 2 + sum(COUNTER.count_text(t) + 2 for t in short) - 1
    kept, folded = roll_user_messages(
        short[:2], [task, short[2]], max_tokens=share, counter=COUNTER
    )
    assert kept == tuple(short) and folded == (task,)
