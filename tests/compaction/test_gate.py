"""The quality gate and provenance (SPEC §5) against stand-ins that lose things on purpose.

Each stand-in of tests/support/fakellm.py answers over real HTTP; the gate must catch what it
loses (scores below 1 for the answer, the probes named as caught or dropped) and the
stored summary must keep every probe that fits its share, every item citing seqs of the
log that hold its words.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.compaction import gate
from app.compaction.engine import summarise
from app.compaction.model_client import ChatModelClient
from app.compaction.outcome import SummaryOutcome
from app.compaction.provenance import message_text, split_cites
from app.compaction.summary import StructuredSummary
from app.compaction.turns import CompactionPlan, plan_range
from app.core.conversation import LoggedMessage
from tests.support.compaction_builders import COUNTER, EngineSettings, call, log_of
from tests.support.fakellm import FakeLLM

CITED_SECTIONS = (
    "facts", "decisions", "open_todos", "user_prefs", "timeline", "user_messages", "artifacts",
    "pinned",
)  # fmt: skip


def _coding_log(lang: str = "en", pad: int = 4) -> list[LoggedMessage]:
    zh = lang == "zh"
    items: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "修复 app/calc.py 里失败的测试。不要修改 migrations 目录。"
            if zh
            else "Fix the failing test in app/calc.py. Never touch the migrations folder.",
        },
        {"role": "assistant", "content": None,
         "tool_calls": [call("c1", "bash", {"command": "cat app/calc.py"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "def add(a, b):\n    return a - b\n"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("c2", "bash", {"command": "pytest tests/test_calc.py -q"})]},
        {"role": "tool", "tool_call_id": "c2",
         "content": "FAILED tests/test_calc.py::test_add - assert -1 == 3\nexit code 1"},
        {
            "role": "assistant",
            "content": "我们决定修复 app/calc.py 中的 add()，并把 API 端口定为 8443。"
            "待办：修复后重新运行 pytest。"
            if zh
            else "We decided to fix add() in app/calc.py and to keep port 8443 for the API. "
            "TODO: rerun pytest after the fix.",
        },
        {"role": "assistant", "content": None,
         "tool_calls": [call("c3", "get_order", {"order_id": "W123"})]},
        {"role": "tool", "tool_call_id": "c3", "content": "error: order W123 not found (E4042)"},
        # A question nothing answered before the next user message: an open one.
        {"role": "user", "content": "我们发布哪个版本？" if zh else "Which version do we ship?"},
    ]  # fmt: skip
    for i in range(pad):
        filler = f"继续检查第 {i} 个模块，一切正常。" * 6 if zh else f"Checked module {i}. " * 12
        items.append({"role": "user", "content": f"检查模块 {i}" if zh else f"Check {i}."})
        items.append({"role": "assistant", "content": filler})
    items += [
        {"role": "user", "content": "现在更新文档。" if zh else "Now update the docs."},
        {"role": "assistant", "content": "好的。" if zh else "On it."},
    ]
    return log_of(items)


def _plan(log: list[LoggedMessage]) -> CompactionPlan:
    plan = plan_range(log, watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    return plan


async def _summarise(
    llm: FakeLLM | None,
    plan: CompactionPlan,
    previous: StructuredSummary | None = None,
    **overrides: Any,
) -> SummaryOutcome:
    client = None
    if llm is not None:
        client = ChatModelClient(base_url=llm.base_url, model="fake", api_key="k", max_retries=0)
    try:
        return await summarise(
            plan,
            previous,
            [],
            client=client,
            settings=EngineSettings(**overrides),
            counter=COUNTER,
        )
    finally:
        if client is not None:
            await client.aclose()


_WORD = re.compile(r"[^\W_]{3,}|\d+")
# Independent of provenance.py and support.py: a token with a digit or an underscore
# (a number, an id, a path) in an item must be one of the cited messages' tokens whole.
_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9_]|[A-Za-z0-9_]")


def _exact_tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text) if re.search(r"[\d_]", t)]


def _has_token(token: str, text: str) -> bool:
    """`token` in `text` with nothing of a name or a number going on at either side."""
    edge = r"(?:[.,:]\d)"
    pattern = rf"(?<![A-Za-z0-9_])(?<!\d[.,:]){re.escape(token)}(?![A-Za-z0-9_]|{edge})"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _holds(item: str, log: dict[int, str]) -> bool:
    """Independent of provenance.py: each cited range lies in the log and one of its seqs
    shares a word (three letters or more, any number) or a CJK character pair with the item;
    and every number, id and path of the item is in a cited seq whole (`10.0` is not held
    by `10`, `Omar_rossi1241` not by `omar_rossi_1241`)."""
    body, ranges = split_cites(item)
    if not ranges:
        return False
    words = {w.casefold() for w in _WORD.findall(body)}
    cjk = re.findall(r"[\u4e00-\u9fff]{2}", body)
    cited: list[str] = []
    for a, b in ranges:
        texts = [log[s].casefold() for s in range(a, b + 1) if s in log]
        if len(texts) != b - a + 1:
            return False
        if not any(any(w in t for w in words) or any(c in t for c in cjk) for t in texts):
            return False
        cited += texts
    # contextd's own marks in the trail: a cut (`…(+3 lines)`), the tool that returned a
    # value (`got: 4NQLHD ← get_user`: the value's seq is cited, the call's name is before).
    body = re.sub(r"…\(\+\d+ lines?\)| ← [\w.-]+$", "", body)
    return all(any(_has_token(k, t) for t in cited) for k in _exact_tokens(body))


def _assert_cited(summary: StructuredSummary, log: list[LoggedMessage]) -> None:
    texts = {m.seq: message_text(m) for m in log}
    for name in CITED_SECTIONS:
        for item in getattr(summary, name):
            assert _holds(item, texts), (name, item)


def _assert_nothing_fitting_lost(outcome: SummaryOutcome) -> None:
    assert outcome.gate is not None
    assert [d for d in outcome.gate["dropped"] if not d["over_share"]] == []


# -- probes -----------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_probes_are_drawn_by_rule_from_the_range(lang: str) -> None:
    plan = _plan(_coding_log(lang))

    def draw() -> tuple[gate.Probe, ...]:
        return gate.draw(
            plan.range_messages,
            plan.preserved_messages,
            kept_artifacts=(),
            user_share=10_000,
            summary_share=10_000,
            counter=COUNTER,
        )

    probes = draw()
    assert probes == draw()  # deterministic
    kinds = {p.kind for p in probes}
    assert {"constraint", "question", "artifact", "decision", "todo", "error"} <= kinds
    errors = [p for p in probes if p.kind == "error"]
    assert {e.seqs for e in errors} == {(4, 5), (7, 8)}
    assert any("E4042" in e.keys for e in errors)
    decision = next(p for p in probes if p.kind == "decision")
    assert "8443" in decision.keys and decision.seqs == (6,)
    # No artifact kept by the section: none of them fits its share.
    assert not any(p.fits for p in probes if p.kind == "artifact")


def test_a_failure_run_again_successfully_is_not_an_open_error() -> None:
    log = log_of(
        [
            {"role": "user", "content": "Run the tests."},
            {"role": "assistant", "content": None,
             "tool_calls": [call("a", "bash", {"command": "pytest -q"})]},
            {"role": "tool", "tool_call_id": "a", "content": "1 failed\nexit code 1"},
            {"role": "assistant", "content": None,
             "tool_calls": [call("b", "bash", {"command": "pytest -q"})]},
            {"role": "tool", "tool_call_id": "b", "content": "1 passed\nexit code 0"},
        ]
    )  # fmt: skip
    probes = gate.draw(log, (), kept_artifacts=(), user_share=99, summary_share=99, counter=COUNTER)
    assert not [p for p in probes if p.kind == "error"]


# -- the stand-ins ------------------------------------------------------------------------


async def test_a_faithful_summary_passes_the_gate_and_cites_its_items(llm: FakeLLM) -> None:
    log = _coding_log()
    outcome = await _summarise(llm, _plan(log))
    assert outcome.gate is not None
    assert (outcome.status, outcome.summarizer, outcome.gate["action"]) == (
        "success",
        "model",
        "none",
    )
    assert set(outcome.gate["scores"].values()) == {1.0}
    assert outcome.gate["caught"] == [] and outcome.gate["dropped"] == []
    _assert_cited(outcome.summary, log)
    assert "[#6]" in outcome.rendered_text  # rendered after its item


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_the_gate_catches_a_model_that_paraphrases_paths_and_numbers(
    llm: FakeLLM, lang: str
) -> None:
    llm.behaviour = "paraphrase"
    log = _coding_log(lang)
    outcome = await _summarise(llm, _plan(log))
    assert outcome.gate is not None
    assert outcome.gate["answer_scores"]["decision"] < 1
    caught = [c for c in outcome.gate["caught"] if c["kind"] == "decision"]
    assert caught and caught[0]["seqs"] == [6] and "8443" in caught[0]["text"]
    assert caught[0]["by"] == "patch"  # the retry paraphrased again
    assert llm.call_count == 2 and outcome.anchor_retry_used
    assert "8443" in llm.calls[1].body["messages"][-1]["content"]  # named in the retry
    assert outcome.gate["scores"]["decision"] == 1.0
    assert "8443" in outcome.rendered_text
    _assert_nothing_fitting_lost(outcome)
    _assert_cited(outcome.summary, log)


async def test_the_gate_catches_a_model_that_drops_the_oldest_half(llm: FakeLLM) -> None:
    llm.behaviour = "drop_oldest"
    log = _coding_log(pad=8)
    outcome = await _summarise(llm, _plan(log))
    assert outcome.gate is not None
    missed = {c["kind"] for c in outcome.gate["caught"]}
    assert {"decision", "todo"} <= missed
    assert outcome.gate["answer_scores"]["decision"] < 1
    assert outcome.gate["scores"]["decision"] == 1.0
    assert "TODO: rerun pytest after the fix." in outcome.rendered_text
    _assert_nothing_fitting_lost(outcome)
    _assert_cited(outcome.summary, log)


async def test_an_invented_citation_is_corrected_from_the_range(llm: FakeLLM) -> None:
    llm.behaviour = "invent_seq"
    log = _coding_log()
    plan = _plan(log)
    outcome = await _summarise(llm, plan)
    assert outcome.gate is not None
    assert outcome.gate["citations"]["corrected"] > 0
    past = f"[#{plan.new_watermark + 7}]"
    assert past not in outcome.rendered_text
    _assert_cited(outcome.summary, log)
    for item in outcome.summary.decisions:
        assert split_cites(item)[1] == ((6, 6),)


async def test_the_extractive_path_cites_exactly_and_passes_the_gate() -> None:
    log = _coding_log("zh")
    outcome = await _summarise(None, _plan(log))
    _assert_cited(outcome.summary, log)
    _assert_nothing_fitting_lost(outcome)


async def test_citations_roll_over_compactions(llm: FakeLLM) -> None:
    log = _coding_log(pad=10)
    first = plan_range(log[:16], watermark=0, min_preserved_turns=1)
    assert isinstance(first, CompactionPlan)
    s1 = (await _summarise(llm, first)).summary
    second = plan_range(log, watermark=first.new_watermark, min_preserved_turns=1)
    assert isinstance(second, CompactionPlan)
    outcome = await _summarise(llm, second, s1)
    _assert_cited(outcome.summary, log)
    # What the first summary cited below the new range keeps its citation.
    assert any(split_cites(i)[1] == ((6, 6),) for i in outcome.summary.decisions)


# -- invented items ----------------------------------------------------------------------


def _booking_log(lang: str = "en") -> list[LoggedMessage]:
    """A tau-bench-like dialogue: a user id, dates, a reservation code, a seat count."""
    zh = lang == "zh"
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "你好！我要把航班从休斯顿改到西雅图，原定 5 月 23 日，想改到 "
         "5 月 24 日。我的用户 ID 是 omar_rossi_1241。" if zh else "Hi! I need to change my "
         "flight from Houston to Seattle. It is booked for May 23 and I'd like to move it to "
         "May 24. My user id is omar_rossi_1241."},
        {"role": "assistant", "content": None,
         "tool_calls": [call("u1", "get_user_details", {"user_id": "omar_rossi_1241"})]},
        {"role": "tool", "tool_call_id": "u1", "content": '{"user_id": "omar_rossi_1241", '
         '"reservations": ["4NQLHD"], "membership": "gold", "dob": "1979-09-27"}'},
        {"role": "assistant", "content": "您的预订 4NQLHD 在航班 HAT190 上，还剩 10 个座位。" if zh
         else "Your reservation 4NQLHD is on flight HAT190, with 10 seats left."},
        {"role": "user", "content": "好的，请改到 5 月 24 日。" if zh else "Yes, move it to May 24."},
        {"role": "assistant", "content": "已改好。" if zh else "Done, it is moved."},
    ]  # fmt: skip
    for i in range(3):
        filler = f"第 {i} 项核对无误，航班信息一切正常。" * 6 if zh else f"Checked item {i}. " * 12
        items.append({"role": "user", "content": f"核对第 {i} 项" if zh else f"Check {i}."})
        items.append({"role": "assistant", "content": filler})
    items += [
        {"role": "user", "content": "谢谢。" if zh else "Thanks."},
        {"role": "assistant", "content": "不客气。" if zh else "You are welcome."},
    ]
    return log_of(items)


def _dropped(outcome: SummaryOutcome, reason: str) -> list[str]:
    assert outcome.gate is not None
    cites = outcome.gate["citations"]
    texts = [d["text"] for d in cites["dropped_items"] if d["reason"] == reason]
    assert cites[reason] == len(texts) and outcome.invented_dropped == cites["dropped"]
    return texts


def _stored_bodies(outcome: SummaryOutcome) -> list[str]:
    return [split_cites(i)[0] for name in CITED_SECTIONS for i in getattr(outcome.summary, name)]


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_invented_numbers_and_a_mangled_id_are_dropped_and_counted(
    llm: FakeLLM, lang: str
) -> None:
    llm.behaviour = "invent_number"
    log = _booking_log(lang)
    outcome = await _summarise(llm, _plan(log))
    # The rest of the answer is the faithful summary: stored, the drops on the record.
    assert (outcome.status, outcome.summarizer) == ("success", "model")
    dropped = _dropped(outcome, "unsupported")
    assert "Omar_rossi1241" in dropped  # `omar_rossi_1241` does not hold it
    assert "23.0" in dropped and "The value is 23.0" in dropped  # `23` does not hold `23.0`
    assert any(d.startswith("1, 2, 3, 4") for d in dropped)
    assert outcome.gate is not None
    missing = {m for d in outcome.gate["citations"]["dropped_items"] for m in d.get("missing", ())}
    assert {"omar_rossi1241", "23.0"} <= missing
    stored = _stored_bodies(outcome)
    assert not [b for b in stored if "23.0" in b or "rossi1241" in b.casefold() or "17" in b]
    assert "omar_rossi_1241" in outcome.rendered_text  # the real id: the user's own words
    _assert_cited(outcome.summary, log)


async def test_echoes_of_the_instructions_are_dropped(llm: FakeLLM) -> None:
    llm.behaviour = "echo_prompt"
    log = _booking_log()
    outcome = await _summarise(llm, _plan(log))
    assert outcome.status == "success"
    dropped = _dropped(outcome, "echo")
    assert len(dropped) == 3 and "user_prefs" in dropped
    assert "one short line" not in outcome.rendered_text.casefold()
    _assert_cited(outcome.summary, log)


@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_an_invented_sentence_is_dropped_in_either_language(llm: FakeLLM, lang: str) -> None:
    from tests.support.fakellm import INVENTED_FACT

    llm.behaviour = "invent_fact"
    log = _booking_log(lang)
    outcome = await _summarise(llm, _plan(log))
    assert outcome.status == "success"
    assert _dropped(outcome, "unsupported") == [INVENTED_FACT[lang]]
    assert INVENTED_FACT[lang] not in outcome.rendered_text
    _assert_cited(outcome.summary, log)


async def test_a_mostly_invented_answer_gives_way_to_the_extractive_summary(llm: FakeLLM) -> None:
    from tests.support.fakellm import summary_answer

    llm.script(
        summary_answer(
            {
                "facts": ["10.0", "11.0", "Omar_rossi1241 [#1]", "user_name"],
                "timeline": ["The user wants to move the flight from Houston to Seattle [#1]"],
            }
        )
    )
    log = _booking_log()
    outcome = await _summarise(llm, _plan(log), anchor_retry_enabled=False)
    assert (outcome.status, outcome.summarizer, outcome.reason) == (
        "degraded",
        "extractive",
        "invented",
    )
    assert _dropped(outcome, "unsupported") == ["10.0", "11.0", "Omar_rossi1241", "user_name"]
    assert outcome.gate is not None and outcome.gate["citations"]["kept"] == 1
    _assert_cited(outcome.summary, log)
    _assert_nothing_fitting_lost(outcome)


# -- the property ------------------------------------------------------------------------

_WORDS = ["alpha", "beta", "gamma", "delta", "port", "config", "error", "deploy", "北京", "酒店",
          "omar_rossi_1241"]  # fmt: skip


@st.composite
def _histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(2, 6))):
        words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6))
        rule = draw(st.sampled_from(["", " You must keep it.", " Never drop it.", "?"]))
        items.append({"role": "user", "content": " ".join(words) + rule})
        for step in range(draw(st.integers(0, 2))):
            cid = f"c{turn}_{step}"
            path = f"src/{draw(st.sampled_from(_WORDS[:8]))}_{step}.py"
            items.append({"role": "assistant", "content": None,
                          "tool_calls": [call(cid, "bash", {"command": f"cat {path}"})]})  # fmt: skip
            out = draw(st.sampled_from(["ok", "value 42", "error: E100 failed\nexit code 1"]))
            items.append({"role": "tool", "tool_call_id": cid, "content": out})
        said = draw(st.sampled_from(["Done.", "We decided to use port 8080.", "TODO: check it."]))
        items.append({"role": "assistant", "content": " ".join(words) + ". " + said})
    items.append({"role": "user", "content": "Go on."})
    return items


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(items=_histories(), behaviour=st.sampled_from(["extractive", "normal", "invent_seq",
                                                      "paraphrase", "drop_oldest", "invent_number",
                                                      "echo_prompt", "invent_fact"]))  # fmt: skip
def test_every_item_on_every_path_cites_seqs_that_hold_it(
    items: list[dict[str, Any]], behaviour: str
) -> None:
    log = log_of(items)
    plan = plan_range(log, watermark=0, min_preserved_turns=1)
    if not isinstance(plan, CompactionPlan):
        return

    async def run() -> SummaryOutcome:
        if behaviour == "extractive":
            return await _summarise(None, plan)
        async with FakeLLM(behaviour=behaviour) as fake:
            return await _summarise(fake, plan)

    outcome = asyncio.run(run())
    _assert_cited(outcome.summary, log)
    _assert_nothing_fitting_lost(outcome)
    # What the stand-ins invent is never stored, whichever path stored the summary.
    from tests.support.fakellm import ECHOES, INVENTED_FACT

    assert outcome.gate is not None
    made = {*ECHOES, *INVENTED_FACT.values(), *(d["text"] for d in outcome.gate["citations"]
                                                 ["dropped_items"])}  # fmt: skip
    assert not [b for b in _stored_bodies(outcome) if b in made or b.endswith(".0")]


async def test_a_patch_that_does_not_hold_gives_way_to_the_extractive_summary(
    llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the gate's patch is lost (as when it cannot fit the cap). The
    # model's answer still lacks the decision after the retry: the extractive summary,
    # which keeps the range's decisions in their own words, is stored instead.
    from dataclasses import replace

    from app.compaction import fit

    patched = fit._patched
    monkeypatch.setattr(
        fit,
        "_patched",
        lambda brief, summary, patch: patched(brief, summary, replace(patch, probes=())),
    )
    llm.behaviour = "paraphrase"
    log = _coding_log()
    outcome = await _summarise(llm, _plan(log))
    assert outcome.gate is not None
    assert (outcome.status, outcome.summarizer, outcome.reason) == (
        "degraded",
        "extractive",
        "gate_dropped",
    )
    assert outcome.gate["action"] == "extractive"
    assert outcome.gate["answer_scores"]["decision"] < 1  # what the model's answer kept
    by = {c["kind"]: c["by"] for c in outcome.gate["caught"]}
    assert by["decision"] == "extractive"
    assert outcome.gate["scores"]["decision"] == 1.0 and "8443" in outcome.rendered_text
    _assert_cited(outcome.summary, log)
