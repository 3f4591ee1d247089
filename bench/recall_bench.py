"""Recall: search latency at scale, and recall@3.

    python bench/recall_bench.py [--parts latency,recall] [--database-url URL]
        [--messages 1000000] [--big 100000] [--keep]
        [--zh-budgets 300,500,1000,2000] [--pad 0]

Each part runs in a throwaway database, migrated to head, with the app built in this
process (`create_app`: no HTTP server in between).

1. latency: `--messages` messages in all, `--big` of them in one session and the
   rest in sessions of 5,000: each distinct dataset message's row and lexemes are
   made once, in Python, and the database replicates them (INSERT … SELECT over
   generate_series; every 100th message carries a unique code `RX-<n>`, made one by
   one), then the GIN index; then 20 other codes are searched 8 times each by a model
   through the recall tool (the calls and the Python client's answers appended to the
   big session through the app, as an agent loop appends them); then ANALYZE.
   `--keep` keeps that database for the next run (named by a fingerprint of what
   appends store, the migrations and the sizes: loaded again when they change). Then
   `app.search.service.search` on the big session, one call at a time, for five kinds
   of query: a unique code, a word or identifier of the dataset (dozens to thousands
   of matches), a question naming a unique code ("what did the output say about
   RX-…"), a question of common words only, a Chinese word or phrase; and, at the
   tool's limit, a code searched before and a question naming one, with how often the
   message holding the code still comes first. p50/p99/max in ms per kind, over every
   call.
2. recall: the dataset's sessions by language (English: each alone, after `--pad`
   messages of the dataset when given; Chinese: the short dialogues one after
   another as one conversation), replayed message by message. Before each
   assistant message (Chinese: each message, a user's too) whose log exceeds
   8,000 tokens (Chinese: each of `--zh-budgets`, since at 8,000 it hardly
   trims), the payload at that budget (GET /context, default strategy); for every
   identifier of that message (app/compaction/signals.extract_identifiers; Chinese:
   also the names and phrases it takes from earlier, `chinese_terms`) that the
   payload does not hold and the log before it does: search with it, and with a
   question naming it; a hit when one of the top 3 messages holds it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/recall_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg
import httpx

from bench.common import (
    admin,
    app_client,
    database_server,
    dataset_sessions,
    dataset_warning,
    ints,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    percentile,
    plain_url,
    progress,
    set_statistics,
    with_database,
    with_unique_ids,
)

TENANT = "default"


def app_state(url: str) -> AbstractAsyncContextManager[tuple[httpx.AsyncClient, Any]]:
    """The app in this process (`bench.common.app_client`); compactions are not run."""
    return app_client(url, run_compactions_in_process=False)


# --- 1. latency --------------------------------------------------------------------------

# The load: each distinct dataset message's row and lexemes are made once, here, and
# the database replicates them (INSERT … SELECT over generate_series); only the rows
# with a unique code are made one by one. Then the GIN index, VACUUM and ANALYZE.
CODE_EVERY = 100
KEEP_PREFIX = "contextd_recall_keep"


def _code(sid_first_code: int, seq: int) -> str:
    return f"RX-{sid_first_code + (seq - 1) // CODE_EVERY}"


def layout(big: int, total: int) -> tuple[list[str], list[int]]:
    """The sessions (the big one first) and their sizes."""
    sizes = [big] + [5000] * max(0, (total - big) // 5000)
    return [f"big-{big}"] + [f"s{i}" for i in range(1, len(sizes))], sizes


async def load(url: str, big: int, total: int) -> None:
    """The sessions and their messages."""
    from app.index.lexemes import session_lexeme, tsvector_literal
    from app.index.searchable import searchable_text

    messages = load_messages()
    sids, sizes = layout(big, total)
    firsts: list[int] = []
    code = 0
    for n in sizes:
        firsts.append(code)
        code += n // CODE_EVERY + 1
    conn = await asyncpg.connect(plain_url(url))
    try:
        start = time.perf_counter()
        await conn.execute("DROP INDEX ix_messages_search")
        await conn.execute(
            "CREATE TEMP TABLE src (k int PRIMARY KEY, role text, body jsonb, words text)"
        )
        records = [
            (k, m["role"], json.dumps(m, ensure_ascii=False), tsvector_literal(searchable_text(m)))
            for k, m in enumerate(messages)
        ]
        await conn.copy_records_to_table("src", records=records)
        await conn.execute(
            "CREATE TEMP TABLE coded (sid text, seq bigint, body jsonb, words text,"
            " PRIMARY KEY (sid, seq))"
        )
        coded = []
        for sid, n, first in zip(sids, sizes, firsts, strict=True):
            for seq in range(1, n + 1, CODE_EVERY):
                m = messages[(seq - 1) % len(messages)]  # a unique code, as tool outputs carry ids
                body = {**m, "content": f"{m.get('content') or ''}\nresult id {_code(first, seq)}"}
                coded.append((sid, seq, json.dumps(body, ensure_ascii=False),
                              tsvector_literal(searchable_text(body))))  # fmt: skip
        await conn.copy_records_to_table("coded", records=coded)
        for table in ("src", "coded"):  # COPY has no binary form of tsvector: parse once here
            await conn.execute(
                f"ALTER TABLE {table} ALTER words TYPE tsvector USING words::tsvector"
            )
        await conn.copy_records_to_table(
            "sessions",
            records=[(TENANT, sid, "o200k_base", n) for sid, n in zip(sids, sizes, strict=True)],
            columns=["tenant_id", "id", "tokenizer", "last_seq"],
        )
        for sid, n in zip(sids, sizes, strict=True):
            key = "'" + session_lexeme(TENANT, sid) + "'"
            await conn.execute(
                """
                INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body,
                                      token_count, context_tokens_through, search)
                SELECT $1, $2, g.i, $2 || '-' || g.i, s.role, coalesce(c.body, s.body),
                       10, 10 * g.i, $3::tsvector || coalesce(c.words, s.words)
                FROM generate_series(1, $4::bigint) AS g(i)
                JOIN src s ON s.k = (g.i - 1) % $5
                LEFT JOIN coded c ON c.sid = $2 AND c.seq = g.i
                ORDER BY g.i
                """,
                TENANT, sid, key, n, len(messages),
            )  # fmt: skip
        progress(f"  wrote {sum(sizes):,} messages in {time.perf_counter() - start:.0f}s")
        start = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute("CREATE INDEX ix_messages_search ON messages USING gin (search)")
        progress(f"  GIN index built in {time.perf_counter() - start:.0f}s")
    finally:
        await conn.close()
    async with app_state(url) as (c, app):
        await echo(c, app, sids[0], echoed_codes(big))


def fingerprint(args: argparse.Namespace) -> str:
    """What the loaded database depends on: what appends store (the lexemes of the
    dataset's messages), the schema, the sizes."""
    from app.index.lexemes import tsvector_literal
    from app.index.searchable import searchable_text

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{args.messages}:{args.big}:echoes {ECHOED}x{ECHOES}".encode())
    for m in load_messages():
        h.update(tsvector_literal(searchable_text(m)).encode())
    for path in sorted((root / "app/db/migrations/versions").glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


@contextmanager
def latency_database(server: str | None, args: argparse.Namespace) -> Iterator[str]:
    """The loaded database: a throwaway one, or with `--keep` one kept between runs (named
    by a fingerprint of what it depends on: loaded again, and older ones dropped, when
    the lexemes, the migrations or the sizes change)."""
    from app.db.migrate import run_migrations

    if not args.keep:
        with migrated_database(args, prefix="contextd_recall") as db:
            asyncio.run(load(db.url, args.big, args.messages))
            asyncio.run(set_statistics(db.url, "analyze"))
            yield db.url
        return
    if not server:
        raise SystemExit("--keep needs --database-url (an embedded server is thrown away)")
    base = plain_url(server)
    name = f"{KEEP_PREFIX}_{fingerprint(args)}"

    async def existing() -> dict[str, bool]:
        """The kept databases, each with whether its load ended (its comment says so)."""
        conn = await asyncpg.connect(base)
        try:
            rows = await conn.fetch(
                "SELECT datname, shobj_description(oid, 'pg_database') = 'loaded' AS loaded "
                "FROM pg_database WHERE datname LIKE $1",
                KEEP_PREFIX + "_%",
            )
        finally:
            await conn.close()
        return {r["datname"]: bool(r["loaded"]) for r in rows}

    names = asyncio.run(existing())
    loaded = names.get(name, False)
    for old in names:
        if old != name or not loaded:
            asyncio.run(admin(base, f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)'))
    url = with_database(base, name)
    if loaded:
        progress(f"latency: reusing the loaded database {name}")
    else:
        asyncio.run(admin(base, f'CREATE DATABASE "{name}"'))
        run_migrations(url)
        asyncio.run(load(url, args.big, args.messages))
        asyncio.run(set_statistics(url, "analyze"))
        asyncio.run(admin(base, f"COMMENT ON DATABASE \"{name}\" IS 'loaded'"))
    yield url


def queries(messages: list[dict[str, Any]], big: int) -> dict[str, list[str]]:
    from app.compaction.signals import extract_identifiers
    from app.index.searchable import searchable_text

    en = [m for m in messages if not any("\u4e00" <= c <= "\u9fff" for c in str(m.get("content")))]
    idents: list[str] = []
    for m in en:
        for ident in extract_identifiers(str(m.get("content") or "")):
            if ident not in idents and len(ident) >= 4:
                idents.append(ident)
    words = ["error", "test", "file", "python", "function", "return", "import", "def"]
    codes = [f"RX-{n}" for n in range(7, big // 100, max(1, big // 100 // 60))][:60]
    # Chinese words and phrases of the dataset: runs of 2-4 characters cut from its text.
    zh: list[str] = ["数据库", "酒店", "推荐", "地址", "电话", "价格", "附近", "景点"]
    for m in messages:
        for run in re.findall("[\u4e00-\u9fff]{2,}", searchable_text(m)):
            piece = run[: 2 + len(zh) % 3]
            if len(zh) < 60 and len(piece) >= 2 and piece not in zh:
                zh.append(piece)
    # An identifier's tail (`core/merge.py` of `xarray/core/merge.py`): found inside the
    # longer token, which is what the dataset's messages hold.
    tails: list[str] = []
    for ident in idents:
        cut = re.search(r"\w[./:]", ident)
        tail = ident[cut.end() :] if cut else ""
        if len(tail) >= 4 and re.search(r"\w[./:_-]\w", tail) and tail not in tails:
            tails.append(tail)
    return {
        "unique code": codes,
        "dataset word or identifier": (words + idents[::7])[:60],
        "identifier inside a longer token": tails[::3][:60],
        "question naming a code": [f"what did the output say about {c}?" for c in codes],
        "question of common words": [
            f"what did the {a} say about the {b}?" for a in words for b in words if a != b
        ][::2][:28],
        "Chinese phrase": zh,
    }


# Codes the model searched for ECHOES times through the recall tool, in the load: its
# calls and their answers (which quote the code) are among the newest messages, and
# the search ranks them after the message that holds the code.
ECHOED = 20
ECHOES = 8


def echoed_codes(big: int) -> list[str]:
    """ECHOED codes of the big session, none of them among `queries`' unique codes (those
    are 7 + 16k; these even)."""
    return [f"RX-{n}" for n in range(12, big // 100, max(2, big // 100 // ECHOED // 2 * 2))][
        :ECHOED
    ]


async def echo(c: httpx.AsyncClient, app: Any, sid: str, codes: Sequence[str]) -> None:
    """Each code searched ECHOES times by a model through the recall tool, as an agent
    loop with the Python client appends it: the call, then the client's answer (the
    search at the tool's limit, formatted as `contextd_client.recall` does). Part of the
    load: every run, and every kind of query, meets the same log."""
    from contextd_client import SearchResult
    from contextd_client.recall import SEARCH_LIMIT, format_search

    from app.core.recall_tool import NAME
    from app.search import service

    db = app.state.database
    for k in range(ECHOES):
        for n, code in enumerate(codes):
            found = await service.search(db, TENANT, sid, code, limit=SEARCH_LIMIT)
            answer = format_search(SearchResult.model_validate(found.as_dict(sid, code)))
            call_id = f"echo-{k}-{n}"
            arguments = json.dumps({"query": code})
            r = await c.post(
                f"/sessions/{sid}/messages",
                json={
                    "messages": [
                        {"role": "assistant", "content": None, "tool_calls": [{
                            "id": call_id, "type": "function",
                            "function": {"name": NAME, "arguments": arguments},
                        }]},
                        {"role": "tool", "tool_call_id": call_id, "content": answer},
                    ]
                },
            )  # fmt: skip
            r.raise_for_status()


def _holder(n: int) -> int:
    """The big session's message that holds code RX-<n> (its codes start at 0)."""
    return n * CODE_EVERY + 1


async def latency(url: str, args: argparse.Namespace) -> tuple[list[list[object]], str]:
    from contextd_client.recall import SEARCH_LIMIT

    from app.search.service import search

    sid = layout(args.big, args.messages)[0][0]
    rows: list[list[object]] = []
    async with app_state(url) as (_, app):
        db = app.state.database
        kinds = queries(load_messages(), args.big)
        for q in kinds["unique code"][:5]:  # warm the pool and the cache a little
            await search(db, TENANT, sid, q)
        await time_kinds(db, sid, kinds, 10, rows)
        # The codes the model searched for before (the load appended its calls and the
        # answers), at the recall tool's limit.
        echoed = echoed_codes(args.big)
        echo_kinds = {
            "code searched before": echoed,
            "question naming a code searched before": [
                f"what did the output say about {c}?" for c in echoed
            ],
        }
        await time_kinds(db, sid, echo_kinds, SEARCH_LIMIT, rows)
        held = 0
        for c in echoed:
            top = (await search(db, TENANT, sid, c, limit=SEARCH_LIMIT)).hits
            held += bool(top) and top[0].seq == _holder(int(c.removeprefix("RX-")))
    note = f"codes searched before: the message holding the code first in {held} of {len(echoed)}"
    return rows, note + " searches"


async def time_kinds(
    db: Any, sid: str, kinds: dict[str, list[str]], limit: int, rows: list[list[object]]
) -> None:
    """Each query of each kind three times: a row per kind."""
    from app.search.service import search

    for kind, qs in kinds.items():
        times: list[float] = []
        hits: list[int] = []
        for _ in range(3):
            for q in qs:
                start = time.perf_counter()
                found = await search(db, TENANT, sid, q, limit=limit)
                times.append((time.perf_counter() - start) * 1000)
                hits.append(len(found.hits))
        rows.append([kind, len(times), round(statistics.mean(hits), 1),
                     round(percentile(times, 50), 1), round(percentile(times, 99), 1),
                     round(max(times), 1)])  # fmt: skip


# --- 2. recall@3 -------------------------------------------------------------------------


def conversations() -> dict[str, list[list[dict[str, Any]]]]:
    out: dict[str, list[list[dict[str, Any]]]] = {"en": [], "zh": []}
    zh: list[dict[str, Any]] = []
    for k, s in enumerate(dataset_sessions()):
        msgs = [with_unique_ids(m, f"s{k}") for m in s["messages"] if m["role"] != "system"]
        if s["meta"]["lang"] == "zh":
            zh.extend(msgs)
        else:
            out["en"].append(msgs)
    out["zh"].append(zh)
    return out


def filler(count: int, salt: int) -> list[dict[str, Any]]:
    """About `count` of the dataset's messages from a point that depends on `salt`, whole
    tool groups only, with call ids of their own."""
    messages = load_messages()
    i = (salt * 997) % len(messages)
    while messages[i]["role"] == "tool":
        i = (i + 1) % len(messages)
    out: list[dict[str, Any]] = []
    wraps = 0
    while len(out) < count or messages[i]["role"] == "tool":
        out.append(with_unique_ids(messages[i], f"pad{salt}-{wraps}"))
        i = (i + 1) % len(messages)
        wraps += i == 0
    return out


async def pad(c: httpx.AsyncClient, sid: str, count: int, salt: int) -> str:
    """A long log before the conversation (`--pad`): its text."""
    from app.index.searchable import searchable_text

    msgs = filler(count, salt)
    k = 0
    while k < len(msgs):
        end = min(k + 200, len(msgs))
        while end < len(msgs) and msgs[end]["role"] == "tool":
            end += 1  # a batch never splits a tool group
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs[k:end]})
        assert r.status_code in (200, 201), r.text[:300]
        k = end
    return "\n".join(searchable_text(m) for m in msgs) + "\n"


NL = {"en": "what did the earlier output say about {}?", "zh": "之前提到的{}是什么？"}
_CJK_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]{4,}")


def chinese_terms(text: str, history: str, shown: str) -> list[str]:
    """Chinese names and phrases a message takes from earlier in the conversation: in
    each run of Chinese characters, the longest piece of 4-8 characters the log before
    it holds (a hotel, a dish, an album: the tool outputs' names) and the payload not."""
    out: list[str] = []
    for run in _CJK_RUN.findall(text):
        for size in range(min(8, len(run)), 3, -1):
            pieces = [run[i : i + size] for i in range(len(run) - size + 1)]
            hit = next((p for p in pieces if p in history and p not in shown), None)
            if hit is not None:
                out.append(hit)
                break
    return out


async def recall_at_3(url: str, args: argparse.Namespace) -> list[list[object]]:
    from app.compaction.signals import extract_identifiers
    from app.core.errors import ValidationFailed
    from app.index.searchable import searchable_text
    from app.messages import repository as messages_repo
    from app.search.service import search

    rows: list[list[object]] = []
    misses: list[str] = []
    async with app_state(url) as (c, app):
        db = app.state.database

        async def found(sid: str, q: str, ident: str) -> bool:
            """Whether one of the top 3 messages for `q` holds `ident`."""
            try:
                hits = (await search(db, TENANT, sid, q, limit=3)).hits
            except ValidationFailed:  # a query past its bounds
                hits = []
            for h in hits:
                async with db.transaction() as s:
                    m = await messages_repo.one(s, TENANT, sid, h.seq)
                if m is not None and ident in searchable_text(m.body):
                    return True
            misses.append(f"{sid}: {q!r}")
            return False

        convs_by_lang = conversations()
        runs = [("en", 8000)] + [("zh", b) for b in args.zh_budgets]
        for lang, budget in runs:
            asked = ids = nls = 0
            for n, msgs in enumerate(convs_by_lang[lang]):
                sid = f"recall-{lang}-{budget}-{n}"
                done = 0
                history_text = ""
                if lang == "en" and args.pad:
                    history_text = await pad(c, sid, args.pad, n)
                seen: set[str] = set()
                tokens = 0
                for t, m in enumerate(msgs):
                    # Chinese: what a user's turn names too (the dialogues are short).
                    turns = ("assistant", "user") if lang == "zh" else ("assistant",)
                    if t == 0 or m["role"] not in turns:
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
                    text = searchable_text(m)
                    wanted = extract_identifiers(text)
                    if lang == "zh":
                        wanted += chinese_terms(text, history_text, shown)
                    for ident in wanted:
                        if ident in seen or ident in shown or ident not in history_text:
                            continue
                        seen.add(ident)
                        asked += 1
                        ids += await found(sid, ident, ident)
                        nls += await found(sid, NL[lang].format(ident), ident)
            rows.append([lang, budget, asked, f"{ids}/{asked} = {ids / max(asked, 1):.1%}",
                         f"{nls}/{asked} = {nls / max(asked, 1):.1%}"])  # fmt: skip
    for line in misses[:80]:
        progress(f"  miss: {line}")
    if len(misses) > 80:
        progress(f"  … and {len(misses) - 80} more misses")
    return rows


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--parts", default="latency,recall")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--big", type=int, default=100_000)
    # The Chinese dialogues are short: at 8,000 tokens few identifiers are ever left out.
    p.add_argument("--zh-budgets", type=ints, default="300,500,1000,2000")
    p.add_argument(
        "--keep",
        action="store_true",
        help="latency: keep the loaded database for the next run (and reuse it)",
    )
    p.add_argument(
        "--pad",
        type=int,
        default=0,
        help="recall: this many of the dataset's messages before each English conversation",
    )
    args = p.parse_args()
    parts = set(args.parts.split(","))
    server = database_server(args)
    print(f"# recall_bench {' '.join(sys.argv[1:])}\n\n{machine_info()}{dataset_warning()}")
    print(f"load average before: {load_average()}\n")
    if "latency" in parts:
        progress(f"latency: {args.messages:,} messages ({args.big:,} in one session)")
        with latency_database(server, args) as url:
            rows, note = asyncio.run(latency(url, args))
        print(f"## search latency: a {args.big:,}-message session in a "
              f"{args.messages:,}-message database (statistics: analyze)\n")  # fmt: skip
        headers = ["query", "calls", "hits", "p50 ms", "p99 ms", "max ms"]
        print(markdown_table(headers, rows))
        print(f"\n{note}")
    if "recall" in parts:
        with migrated_database(args, prefix="contextd_recall") as db:
            rows = asyncio.run(recall_at_3(db.url, args))
        print("\n## recall@3 of identifiers the payload lacks\n")
        headers = ["language", "budget", "asked", "by identifier", "by question"]
        print(markdown_table(headers, rows))
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
