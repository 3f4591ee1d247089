"""Generated histories (hypothesis) for the invariants of SPEC §3: every kind of message,
tool groups open and closed, pinned and hidden ones."""

from __future__ import annotations

from hypothesis import strategies as st

from app.core.conversation import LoggedMessage
from tests.support.context_builders import assistant, logged, tool, user

WORDS = [
    "we", "must", "never", "use", "src/app/main.py", "the", "budget", "is", "42", "`x = 1`",
    "decided", "to", "keep", "it", "short", "必须", "不要", "需要", "北京", "tests", "ok",
]  # fmt: skip

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
big_texts = st.integers(min_value=1, max_value=60).map(lambda n: "line of output 123\n" * 40 * n)


@st.composite
def histories(draw: st.DrawFn) -> list[LoggedMessage]:
    out: list[LoggedMessage] = []
    call = 0
    n = draw(st.integers(min_value=0, max_value=25))
    for _ in range(n):
        seq = len(out) + 1
        kind = draw(
            st.sampled_from(["user", "user", "assistant", "group", "group", "system", "summary"])
        )
        pinned = draw(st.booleans()) if draw(st.integers(0, 6)) == 0 else False
        shown = draw(st.integers(0, 8)) != 0
        if kind == "user":
            out.append(logged(seq, user(draw(texts)), pinned=pinned, include_in_context=shown))
        elif kind == "assistant":
            error = {"type": "timeout", "message": "cut"} if draw(st.integers(0, 9)) == 0 else None
            out.append(logged(seq, assistant(draw(texts)), pinned=pinned, error=error))
        elif kind in ("system", "summary"):
            meta = {"kind": "summary"} if kind == "summary" else None
            out.append(logged(seq, {"role": "system", "content": draw(texts)}, metadata=meta))
        else:
            ids = [f"call_{call + i}" for i in range(draw(st.integers(1, 3)))]
            call += len(ids)
            text = draw(st.one_of(st.none(), texts))
            out.append(logged(seq, assistant(text, *ids), pinned=pinned))
            for cid in ids:
                body = tool(cid, draw(st.one_of(texts, big_texts)))
                out.append(logged(len(out) + 1, body, pinned=draw(st.integers(0, 9)) == 0))
    if draw(st.integers(0, 5)) == 0:
        # An in-flight call at the end, sometimes with part of its results.
        ids = [f"call_{call}", f"call_{call + 1}"]
        out.append(logged(len(out) + 1, assistant(None, *ids)))
        if draw(st.booleans()):
            out.append(logged(len(out) + 1, tool(ids[0], "partial")))
    return out
