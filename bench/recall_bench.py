"""Recall: search latency at scale, the index's cost to appends, and recall@3.

    python bench/recall_bench.py [--parts latency,append,recall] [--database-url URL]
        [--messages 1000000] [--big 100000] [--rounds 3] [--round-s 8] [--clients 20]
        [--budget 8000] [--statistics analyze|none]

Each part runs in a throwaway database (on `--database-url`, else
`CONTEXTD_DATABASE_URL`, else an embedded PostgreSQL), migrated to head, with the
app built in this process (`create_app`: no HTTP server in between).

1. latency: `--messages` messages in all, `--big` of them in one session and the
   rest in sessions of 5,000, written by bulk COPY (the dataset's messages cycled,
   each with the lexemes appends store, the GIN index built after the load; every
   100th message carries a unique code `RX-<n>`). Then `app.search.service.search`
   on the big session, one call at a time, for four kinds of query: a unique code,
   a word or identifier of the dataset (dozens to thousands of matches), a
   question naming a unique code ("what did the output say about RX-…"), a
   Chinese phrase. p50/p99/max in ms per kind, over every call.
2. append: bench/search_append.py's in-process A/B (`--via process --messages plain`;
   that bench also measures through HTTP and reports CPU per append): concurrent
   appends (one dataset message each, `--clients` sessions) through
   `app.messages.service.append` with its group commit, A with the search index
   (lexemes made and stored, GIN maintained) against B without (no lexemes, index
   dropped), alternated A B A B … `--rounds` times for `--round-s` seconds each.
   appends/s per round, and A/B.
3. recall: the dataset's sessions by language (English: each alone; Chinese: the
   short dialogues one after another as one long conversation), replayed message
   by message. Before each assistant message whose log exceeds `--budget`, the
   payload at that budget (GET /context, default strategy; the Chinese conversation
   also at `--zh-budget`, since at 8,000 tokens it hardly trims); for every identifier
   of that assistant message (app/compaction/signals.extract_identifiers) that the
   payload does not hold and the log before it does: search with the identifier,
   and with a question naming it; a hit when one of the top 3 messages holds it.

The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/recall_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx

from bench.common import (
    DATASET,
    dataset_warning,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    percentile,
    plain_url,
    set_statistics,
    throwaway_database,
)

TENANT = "default"


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@asynccontextmanager
async def app_state(url: str) -> AsyncIterator[Any]:
    from app.main import create_app
    from app.settings import load_settings

    settings = load_settings(database_url=None, run_compactions_in_process=False)
    app = create_app(settings, database_url=url)
    async with app.router.lifespan_context(app):
        yield app


# --- 1. latency --------------------------------------------------------------------------


def _rows(
    messages: list[dict[str, Any]], sid: str, count: int, first_code: int
) -> Iterator[list[Any]]:
    from app.messages.lexemes import searchable_text, session_lexeme, tsvector_literal

    key = "'" + session_lexeme(TENANT, sid) + "'"
    words = [tsvector_literal(searchable_text(m)) for m in messages]
    for i in range(count):
        k = i % len(messages)
        m = messages[k]
        body = m
        lexemes = words[k]
        if i % 100 == 0:  # a unique code, as tool outputs carry ids
            code = f"RX-{first_code + i // 100}"
            body = {**m, "content": f"{m.get('content') or ''}\nresult id {code}"}
            lexemes = tsvector_literal(searchable_text(body))
        yield [
            TENANT,
            sid,
            i + 1,
            f"{sid}-{i + 1}",
            m["role"],
            json.dumps(body, ensure_ascii=False),
            10,
            10 * (i + 1),
            f"{key} {lexemes}",
        ]


async def load(url: str, big: int, total: int) -> list[str]:
    """The sessions (the big one first) and their messages, by COPY."""
    messages = load_messages()
    sizes = [big] + [5000] * max(0, (total - big) // 5000)
    sids = [f"big-{big}"] + [f"s{i}" for i in range(1, len(sizes))]
    conn = await asyncpg.connect(plain_url(url))
    try:
        await conn.execute("DROP INDEX ix_messages_search")
        await conn.copy_records_to_table(
            "sessions",
            records=[(TENANT, sid, "o200k_base", n) for sid, n in zip(sids, sizes, strict=True)],
            columns=["tenant_id", "id", "tokenizer", "last_seq"],
        )
        code = 0
        start = time.perf_counter()
        for sid, n in zip(sids, sizes, strict=True):
            buf = io.StringIO()
            csv.writer(buf).writerows(_rows(messages, sid, n, code))
            code += n // 100 + 1
            await conn.copy_to_table(
                "messages",
                source=io.BytesIO(buf.getvalue().encode()),
                columns=[
                    "tenant_id", "session_id", "seq", "message_id", "role", "body",
                    "token_count", "context_tokens_through", "search",
                ],
                format="csv",
            )  # fmt: skip
        progress(f"  copied {sum(sizes):,} messages in {time.perf_counter() - start:.0f}s")
        start = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute("CREATE INDEX ix_messages_search ON messages USING gin (search)")
        progress(f"  GIN index built in {time.perf_counter() - start:.0f}s")
    finally:
        await conn.close()
    return sids


def queries(messages: list[dict[str, Any]], big: int) -> dict[str, list[str]]:
    from app.compaction.signals import extract_identifiers

    en = [m for m in messages if not any("\u4e00" <= c <= "\u9fff" for c in str(m.get("content")))]
    idents: list[str] = []
    for m in en:
        for ident in extract_identifiers(str(m.get("content") or "")):
            if ident not in idents and len(ident) >= 4:
                idents.append(ident)
    words = ["error", "test", "file", "python", "function", "return", "import", "def"]
    codes = [f"RX-{n}" for n in range(7, big // 100, max(1, big // 100 // 60))][:60]
    zh = ["数据库", "酒店", "推荐", "地址", "电话", "价格", "附近", "景点"]
    return {
        "unique code": codes,
        "dataset word or identifier": (words + idents[::7])[:60],
        "question naming a code": [f"what did the output say about {c}?" for c in codes],
        "Chinese phrase": zh,
    }


async def latency(url: str, args: argparse.Namespace) -> list[list[object]]:
    from app.search import service

    progress(f"latency: loading {args.messages:,} messages ({args.big:,} in one session)")
    sids = await load(url, args.big, args.messages)
    await set_statistics(url, args.statistics)
    rows: list[list[object]] = []
    async with app_state(url) as app:
        db = app.state.database
        kinds = queries(load_messages(), args.big)
        for q in kinds["unique code"][:5]:  # warm the pool and the cache a little
            await service.search(db, TENANT, sids[0], q)
        for kind, qs in kinds.items():
            times: list[float] = []
            hits: list[int] = []
            for _ in range(3):
                for q in qs:
                    start = time.perf_counter()
                    found = await service.search(db, TENANT, sids[0], q, limit=10)
                    times.append((time.perf_counter() - start) * 1000)
                    hits.append(len(found.hits))
            rows.append(
                [
                    kind,
                    len(times),
                    round(statistics.mean(hits), 1),
                    round(percentile(times, 50), 1),
                    round(percentile(times, 99), 1),
                    round(max(times), 1),
                ]
            )
    return rows


# --- 2. append ---------------------------------------------------------------------------


async def appends(url: str, args: argparse.Namespace) -> list[list[object]]:
    """bench/search_append.py's in-process A/B, on the dataset's plain messages."""
    from bench.search_append import measure

    ab = argparse.Namespace(
        variants=["A", "B"], rounds=args.rounds, round_s=args.round_s, warmup_s=1.0,
        messages="plain", workers=1,
    )  # fmt: skip
    conn = await asyncpg.connect(plain_url(url))
    try:
        results = await measure(url, "process", args.clients, ab, conn)
    finally:
        await conn.close()
    rows: list[list[object]] = []
    rates = {v: [r[0] for r in results[v]] for v in ("A", "B")}
    for r in range(args.rounds):
        a, b = rates["A"][r], rates["B"][r]
        rows.append([r + 1, round(a), round(b), f"{a / b:.0%}"])
    a, b = statistics.median(rates["A"]), statistics.median(rates["B"])
    rows.append(["median", round(a), round(b), f"{a / b:.0%}"])
    return rows


# --- 3. recall@3 -------------------------------------------------------------------------


def conversations() -> dict[str, list[list[dict[str, Any]]]]:
    from bench.common import with_unique_ids

    out: dict[str, list[list[dict[str, Any]]]] = {"en": [], "zh": []}
    zh: list[dict[str, Any]] = []
    with DATASET.open(encoding="utf-8") as f:
        for k, line in enumerate(f):
            s = json.loads(line)
            msgs = [with_unique_ids(m, f"s{k}") for m in s["messages"] if m["role"] != "system"]
            if s["meta"]["lang"] == "zh":
                zh.extend(msgs)
            else:
                out["en"].append(msgs)
    out["zh"].append(zh)
    return out


NL = {
    "en": "what did the earlier output say about {}?",
    "zh": "之前提到的{}是什么？",
}


async def recall_at_3(url: str, args: argparse.Namespace) -> list[list[object]]:
    from app.compaction.signals import extract_identifiers
    from app.messages.lexemes import searchable_text

    rows: list[list[object]] = []
    misses: list[str] = []
    async with app_state(url) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            convs_by_lang = conversations()
            runs = [("en", args.budget), ("zh", args.budget), ("zh", args.zh_budget)]
            for lang, budget in runs:
                convs = convs_by_lang[lang]
                asked = found_id = found_nl = 0
                for n, msgs in enumerate(convs):
                    sid = f"recall-{lang}-{budget}-{n}"
                    done = 0
                    history_text = ""
                    seen: set[str] = set()
                    tokens = 0
                    for t, m in enumerate(msgs):
                        if m["role"] != "assistant" or t == 0:
                            continue
                        batch = msgs[done:t]
                        if batch:
                            r = await c.post(f"/sessions/{sid}/messages", json={"messages": batch})
                            assert r.status_code in (200, 201), r.text[:300]
                            tokens = r.json()["budget"]["current_tokens"]
                            history_text += "\n".join(searchable_text(x) for x in batch) + "\n"
                            done = t
                        if tokens <= budget:
                            continue
                        payload = (
                            await c.get(f"/sessions/{sid}/context", params={"max_tokens": budget})
                        ).json()
                        shown = json.dumps(payload["messages"], ensure_ascii=False)
                        for ident in extract_identifiers(searchable_text(m)):
                            if ident in seen or ident in shown or ident not in history_text:
                                continue
                            seen.add(ident)
                            asked += 1
                            for q, which in ((ident, "id"), (NL[lang].format(ident), "nl")):
                                got = await c.get(
                                    f"/sessions/{sid}/search", params={"q": q, "limit": 3}
                                )
                                hits = got.json()["hits"] if got.status_code == 200 else []
                                ok = False
                                for h in hits:
                                    full = (await c.get(h["path"])).json()
                                    if ident in searchable_text(full):
                                        ok = True
                                        break
                                if which == "id":
                                    found_id += ok
                                else:
                                    found_nl += ok
                                if not ok:
                                    misses.append(f"{sid} {which}: {q!r}")
                rows.append(
                    [
                        lang,
                        budget,
                        asked,
                        f"{found_id}/{asked} = {found_id / max(asked, 1):.1%}",
                        f"{found_nl}/{asked} = {found_nl / max(asked, 1):.1%}",
                    ]
                )
    for line in misses[:40]:
        progress(f"  miss: {line}")
    if len(misses) > 40:
        progress(f"  … and {len(misses) - 40} more misses")
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--parts", default="latency,append,recall")
    p.add_argument("--database-url", help="PostgreSQL server for the throwaway databases")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--big", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--round-s", type=float, default=8.0)
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--budget", type=int, default=8000)
    # The Chinese dialogues are short: at 8,000 tokens few identifiers are ever left out.
    p.add_argument("--zh-budget", type=int, default=2000)
    p.add_argument("--statistics", choices=("analyze", "none"), default="analyze")
    args = p.parse_args()
    parts = set(args.parts.split(","))
    server = args.database_url or os.environ.get("CONTEXTD_DATABASE_URL")
    print(f"# recall_bench {' '.join(sys.argv[1:])}\n\n{machine_info()}{dataset_warning()}")
    print(f"load average before: {load_average()}\n")
    if "latency" in parts:
        with throwaway_database(server, prefix="contextd_recall") as db:
            from app.db import run_migrations

            run_migrations(db.url)
            rows = asyncio.run(latency(db.url, args))
        print(f"## search latency: a {args.big:,}-message session in a "
              f"{args.messages:,}-message database (statistics: {args.statistics})\n")  # fmt: skip
        print(markdown_table(["query", "calls", "hits", "p50 ms", "p99 ms", "max ms"], rows))
    if "append" in parts:
        with throwaway_database(server, prefix="contextd_recall") as db:
            from app.db import run_migrations

            run_migrations(db.url)
            rows = asyncio.run(appends(db.url, args))
        print(f"\n## appends/s, {args.clients} clients, A with the search index, B without "
              f"(alternated, {args.round_s:.0f} s each)\n")  # fmt: skip
        print(markdown_table(["round", "A: index", "B: none", "A/B"], rows))
    if "recall" in parts:
        with throwaway_database(server, prefix="contextd_recall") as db:
            from app.db import run_migrations

            run_migrations(db.url)
            rows = asyncio.run(recall_at_3(db.url, args))
        print("\n## recall@3 of identifiers the payload lacks\n")
        headers = ["language", "budget", "identifiers", "by identifier", "by question"]
        print(markdown_table(headers, rows))
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
