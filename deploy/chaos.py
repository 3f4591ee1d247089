"""Faults against the compose stack: `make chaos-deploy` (not in CI).

While writers append with client ids (each message's `id`) and retry until acknowledged,
the `contextd` container is killed (SIGKILL) and started again every few seconds, and
every third fault the PostgreSQL container instead. A sampler reads payloads all along
and checks each (tool groups whole, kept seqs in log order). At the end, with the stack
up again, every acknowledged message must be in the log once, at the seq it was
acknowledged with, in each writer's order, and every session's payload must be valid.

Only loopback is spoken to (the published port); the containers are driven with the
engine's own commands. Bounded in time: the faults stop after SECONDS, the writers
finish their group, and the run ends.

    python deploy/chaos.py URL ENGINE CONTEXTD_CONTAINER POSTGRES_CONTAINER SECONDS
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from smoke_checks import KEY, Failed, check_tool_groups

WRITERS = 8
RETRY_FOR_S = 300.0  # one append's retries, across restarts of both containers


@dataclass
class Tally:
    acked: dict[str, dict[str, int]] = field(default_factory=dict)  # session -> id -> seq
    order: dict[str, list[str]] = field(default_factory=dict)  # session -> ids acked, in order
    answers: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    samples_bad: list[str] = field(default_factory=list)
    faults: Counter[str] = field(default_factory=Counter)
    gave_up: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)


def _append(c: httpx.Client, tally: Tally, sid: str, messages: list[dict[str, Any]]) -> bool:
    """Append until acknowledged (the same ids every time: a replay stores nothing)."""
    deadline = time.monotonic() + RETRY_FOR_S
    pause = 0.2
    while time.monotonic() < deadline:
        try:
            r = c.post(f"/sessions/{sid}/messages", json={"messages": messages})
            with tally.lock:
                tally.answers[str(r.status_code)] += 1
            if r.status_code in (200, 201):
                with tally.lock:
                    for m in r.json()["messages"]:
                        known = tally.acked[sid].get(m["id"])
                        if known is None:
                            tally.order[sid].append(m["id"])
                        elif known != m["seq"]:
                            tally.samples_bad.append(f"{m['id']} acked at {known} then {m['seq']}")
                        tally.acked[sid][m["id"]] = m["seq"]
                return True
            if r.status_code < 500 and r.status_code != 429:
                raise Failed(f"append answered {r.status_code}: {r.text[:300]}")
        except httpx.TransportError as exc:
            with tally.lock:
                tally.answers[type(exc).__name__] += 1
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
    with tally.lock:
        tally.gave_up += 1
    return False


def writer(url: str, tally: Tally, n: int, stop: threading.Event) -> None:
    sid = f"chaos-{n}"
    rng = random.Random(n)
    with tally.lock:
        tally.acked[sid], tally.order[sid] = {}, []
    with _client(url) as c:
        i = 0
        while not stop.is_set():
            i += 1
            base = f"w{n}-{i}"
            user = {"id": f"{base}-u", "role": "user", "content": f"step {i} of writer {n}"}
            calls = [
                {
                    "id": f"call-{base}-{k}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{k}"})},
                }
                for k in range(rng.randint(1, 3))
            ]
            call = {"id": f"{base}-a", "role": "assistant", "content": None, "tool_calls": calls}
            results = [
                {
                    "id": f"{base}-t{k}",
                    "role": "tool",
                    "tool_call_id": tc["id"],
                    "content": f"contents of f{k} " * rng.randint(5, 200),
                }
                for k, tc in enumerate(calls)
            ]
            shape = rng.random()
            if shape < 0.3:
                appends = [[user]]
            elif shape < 0.65:
                appends = [[user, call, *results]]
            else:  # the group split over two appends: the call, then its results
                appends = [[user, call], results]
            for messages in appends:
                if not _append(c, tally, sid, messages):
                    return


def sampler(url: str, tally: Tally, stop: threading.Event) -> None:
    rng = random.Random(0)
    with _client(url) as c:
        while not stop.is_set():
            sid = f"chaos-{rng.randrange(WRITERS)}"
            try:
                r = c.get(f"/sessions/{sid}/context", params={"max_tokens": 4000})
            except httpx.TransportError:
                time.sleep(0.5)
                continue
            if r.status_code == 200:
                payload = r.json()
                problem = None
                try:
                    # A writer may be between the call and its results: open at the end only.
                    check_tool_groups(payload["messages"], open_tail=True)
                    kept = payload.get("kept_seqs") or []
                    if kept != sorted(kept) or len(kept) != len(set(kept)):
                        problem = f"kept_seqs not in log order: {kept}"
                except Failed as exc:
                    problem = str(exc)
                with tally.lock:
                    tally.samples += 1
                    if problem:
                        tally.samples_bad.append(f"{sid}: {problem}")
            time.sleep(0.3)


def faults(engine: str, server: str, database: str, seconds: float, tally: Tally) -> None:
    rng = random.Random(1)
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        time.sleep(rng.uniform(3, 8))
        n += 1
        target = database if n % 3 == 0 else server
        subprocess.run([engine, "kill", "-s", "KILL", target], capture_output=True, check=False)
        # A restart policy may have started it already: then this does nothing.
        subprocess.run([engine, "start", target], capture_output=True, check=False)
        tally.faults["postgres" if target == database else "contextd"] += 1


def final_check(url: str, tally: Tally) -> dict[str, Any]:
    lost = duplicated = misplaced = reordered = 0
    invalid: list[str] = []
    with _client(url) as c:
        for sid, acked in tally.acked.items():
            log: list[dict[str, Any]] = []
            after = 0
            while True:
                r = c.get(f"/sessions/{sid}/messages", params={"after_seq": after, "limit": 1000})
                r.raise_for_status()
                page = r.json()
                log.extend(page["messages"])
                if not page.get("next_after_seq"):
                    break
                after = page["next_after_seq"]
            ids = Counter(m.get("id") for m in log)
            duplicated += sum(n - 1 for n in ids.values() if n > 1)
            at = {m.get("id"): m["seq"] for m in log}
            lost += sum(1 for i in acked if i not in at)
            misplaced += sum(1 for i, s in acked.items() if i in at and at[i] != s)
            seqs = [acked[i] for i in tally.order[sid]]
            reordered += sum(1 for a, b in itertools.pairwise(seqs) if a >= b)
            r = c.get(f"/sessions/{sid}/context", params={"max_tokens": 4000})
            try:
                if r.status_code != 200:
                    raise Failed(f"payload {r.status_code}")
                check_tool_groups(r.json()["messages"])
            except Failed as exc:
                invalid.append(f"{sid}: {exc}")
    return {
        "acknowledged": sum(len(a) for a in tally.acked.values()),
        "lost": lost,
        "duplicated": duplicated,
        "at_another_seq": misplaced,
        "reordered": reordered,
        "final_payloads_invalid": invalid,
    }


def main(argv: list[str]) -> int:
    url, engine, server, database, seconds = argv
    from smoke_checks import ready

    tally = Tally()
    stop = threading.Event()
    threads = [threading.Thread(target=writer, args=(url, tally, n, stop)) for n in range(WRITERS)]
    threads.append(threading.Thread(target=sampler, args=(url, tally, stop)))
    started = time.monotonic()
    for t in threads:
        t.start()
    try:
        faults(engine, server, database, float(seconds), tally)
    finally:
        stop.set()
        for t in threads:
            t.join()
    ready(url)
    result = final_check(url, tally)
    result.update(
        seconds=round(time.monotonic() - started),
        writers=WRITERS,
        faults=dict(tally.faults),
        answers=dict(tally.answers),
        appends_given_up=tally.gave_up,
        payload_samples=tally.samples,
        payload_samples_invalid=tally.samples_bad[:20],
    )
    print(json.dumps(result, indent=2))
    ok = not (
        result["lost"]
        or result["duplicated"]
        or result["at_another_seq"]
        or result["reordered"]
        or result["final_payloads_invalid"]
        or tally.samples_bad
        or tally.gave_up
        or tally.answers.get("500")
    )
    print("chaos: " + ("held" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
