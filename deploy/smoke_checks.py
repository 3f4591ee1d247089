"""The HTTP side of deploy/smoke.sh: what a user checks on a stack just brought up.

Every step talks to the published port on loopback, as a user would, with the compose
file's API key. What was acknowledged is kept in a state file, so that a later step
(after a restart of the container, after `down` and `up`) checks that all of it is
still there, in the order it was acknowledged.

    python deploy/smoke_checks.py ready URL
    python deploy/smoke_checks.py write URL STATE ROUND
    python deploy/smoke_checks.py verify URL STATE
    python deploy/smoke_checks.py compact URL STATE
    python deploy/smoke_checks.py metric URL NAME   (prints the summed value)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

KEY = os.environ.get("CONTEXTD_SMOKE_KEY", "dev-key")
READY_TIMEOUT_S = float(os.environ.get("CONTEXTD_SMOKE_READY_TIMEOUT_S", "300"))
SESSION = "smoke-session"


class Failed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Failed(what)


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def ready(url: str) -> None:
    """/healthz and /readyz answer 200 (the schema is at head), within the timeout."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    last = "no answer"
    with client(url) as c:
        while time.monotonic() < deadline:
            try:
                health, readiness = c.get("/healthz"), c.get("/readyz")
                if health.status_code == readiness.status_code == 200:
                    print(f"ready: /healthz {health.json()} /readyz {readiness.json()}")
                    return
                last = f"/healthz {health.status_code}, /readyz {readiness.status_code}"
            except httpx.TransportError as exc:
                last = type(exc).__name__
            time.sleep(1)
    raise Failed(f"not ready after {READY_TIMEOUT_S:.0f}s: {last}")


def _load(state: Path) -> dict[str, Any]:
    return json.loads(state.read_text()) if state.exists() else {"acked": {}, "words": []}


def write(url: str, state_path: Path, round_name: str) -> None:
    """Appends (a tool group among them), then a payload and a search that find them."""
    state = _load(state_path)
    word = f"zebrafinch{round_name}"  # one word no other message holds
    turns = [
        [{"id": f"{round_name}-u", "role": "user", "content": f"Find the {word} in app.py."}],
        [
            {
                "id": f"{round_name}-a",
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call-{round_name}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                    }
                ],
            },
            {
                "id": f"{round_name}-t",
                "role": "tool",
                "tool_call_id": f"call-{round_name}",
                "content": f"def main():\n    return '{word}'\n" * 20,
            },
        ],
        [{"id": f"{round_name}-r", "role": "assistant", "content": f"The {word} is in main()."}],
    ]
    with client(url) as c:
        if not state["acked"]:
            # Few turns kept verbatim, so that a forced compaction has something to do.
            r = c.put(f"/sessions/{SESSION}", json={"compaction": {"min_preserved_turns": 0}})
            check(r.status_code in (200, 201), f"PUT session: {r.status_code} {r.text}")
        for messages in turns:
            r = c.post(f"/sessions/{SESSION}/messages", json={"messages": messages})
            check(r.status_code == 201, f"append: {r.status_code} {r.text}")
            for m in r.json()["messages"]:
                state["acked"][m["id"]] = m["seq"]
        state["words"].append(word)
        state_path.write_text(json.dumps(state))
        payload = _payload(c)
        hits = c.get(f"/sessions/{SESSION}/search", params={"q": word})
        check(hits.status_code == 200, f"search: {hits.status_code} {hits.text}")
        found = {h["seq"] for h in hits.json()["hits"]}
        wanted = state["acked"][f"{round_name}-u"]
        check(wanted in found, f"search for {word} found seqs {sorted(found)}, not {wanted}")
    print(
        f"write {round_name}: {len(state['acked'])} messages acknowledged, "
        f"payload of {len(payload['messages'])} messages, search found {len(found)}"
    )


def _payload(c: httpx.Client) -> dict[str, Any]:
    r = c.get(f"/sessions/{SESSION}/context", params={"max_tokens": 16000})
    check(r.status_code == 200, f"payload: {r.status_code} {r.text}")
    payload: dict[str, Any] = r.json()
    check(bool(payload["messages"]), "an empty payload")
    check_tool_groups(payload["messages"])
    kept = payload.get("kept_seqs") or []
    check(kept == sorted(kept), f"kept_seqs out of log order: {kept}")
    return payload


def check_tool_groups(messages: list[dict[str, Any]], open_tail: bool = False) -> None:
    """Every tool call answered right after its call, every tool answer after its call
    (with `open_tail`, the last calls may still wait for their answers: a writer
    between the two appends of a group)."""
    open_calls: set[str] = set()
    for m in messages:
        if m.get("role") == "tool":
            check(m.get("tool_call_id") in open_calls, f"a tool answer without its call: {m}")
            open_calls.discard(m["tool_call_id"])
            continue
        check(not open_calls, f"calls left unanswered: {sorted(open_calls)}")
        open_calls = {call["id"] for call in m.get("tool_calls") or []}
    check(open_tail or not open_calls, f"calls left unanswered at the end: {sorted(open_calls)}")


def _log(c: httpx.Client) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        r = c.get(f"/sessions/{SESSION}/messages", params={"after_seq": after, "limit": 1000})
        check(r.status_code == 200, f"read the log: {r.status_code} {r.text}")
        page = r.json()
        out.extend(page["messages"])
        if not page.get("next_after_seq"):
            return out
        after = page["next_after_seq"]


def verify(url: str, state_path: Path) -> None:
    """Every acknowledged message is there, once, at its acknowledged seq."""
    state = _load(state_path)
    with client(url) as c:
        log = _log(c)
        seen = [m.get("id") for m in log]
        check(len(seen) == len(set(seen)), "a message stored twice")
        at = {m.get("id"): m["seq"] for m in log}
        lost = {i: s for i, s in state["acked"].items() if at.get(i) != s}
        check(not lost, f"acknowledged but not found at their seq: {lost}")
        seqs = [m["seq"] for m in log]
        check(seqs == sorted(seqs), "the log out of order")
        _payload(c)
        for word in state["words"]:
            hits = c.get(f"/sessions/{SESSION}/search", params={"q": word}).json()["hits"]
            check(bool(hits), f"search no longer finds {word}")
    print(f"verify: all {len(state['acked'])} acknowledged messages found, in order, once")


def compact(url: str, state_path: Path) -> None:
    """A forced compaction, waited for; it must succeed and leave a valid payload."""
    with client(url) as c:
        r = c.post(
            f"/sessions/{SESSION}/compact", json={"force": True, "wait": True, "timeout_s": 240}
        )
        check(r.status_code == 200, f"compact: {r.status_code} {r.text}")
        job = r.json()
        check(job["status"] == "success", f"the compaction: {job}")
        check(bool(job.get("watermark_after")), f"the compaction moved no watermark: {job}")
        _payload(c)
    print(f"compact: job {job['job_id']} {job['status']}, watermark {job['watermark_after']}")


def metric(url: str, name: str) -> None:
    """The sum of a metric's samples whose labels contain every given `k="v"`."""
    family, _, labels = name.partition("{")
    wanted = [p for p in labels.rstrip("}").split(",") if p]
    with client(url) as c:
        r = c.get("/metrics")
    check(r.status_code == 200, f"/metrics: {r.status_code}")
    print(sum_metric(r.text, family, wanted))


def sum_metric(text: str, family: str, wanted: list[str]) -> float:
    total = 0.0
    for line in text.splitlines():
        sample, _, value = line.rpartition(" ")
        name = sample.split("{", 1)[0]
        if name == family and all(w in sample for w in wanted):
            total += float(value)
    return total


def main(argv: list[str]) -> int:
    command, url, *rest = argv
    try:
        if command == "ready":
            ready(url)
        elif command == "write":
            write(url, Path(rest[0]), rest[1])
        elif command == "verify":
            verify(url, Path(rest[0]))
        elif command == "compact":
            compact(url, Path(rest[0]))
        elif command == "metric":
            metric(url, rest[0])
        else:
            raise SystemExit(f"unknown command {command}")
    except Failed as exc:
        print(f"FAILED {command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
