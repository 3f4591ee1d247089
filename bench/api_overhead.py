"""Per-request cost of the API layer on the hot endpoints, in-process (no network).

    python bench/api_overhead.py [--database-url URL] [--requests 300] [--json out.json]

Seeds one session with 300 messages (tool groups included), then times
`--requests` calls each of: `GET /messages?limit=100`, `GET /context`,
`POST /context` and a one-message append, through `httpx.ASGITransport` into
`create_app` on a throwaway database. Prints p50/p95 in milliseconds.

Made to compare two checkouts of the code (e.g. before and after the typed
OpenAPI models of issue 10): run it once per checkout with
`PYTHONPATH=<checkout>` and compare the tables. The database round trips are in
every figure; what differs between checkouts is the Python around them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.append(str(Path(__file__).resolve().parents[1]))  # PYTHONPATH=<checkout> wins
from bench.common import markdown_table, percentile, throwaway_database


def _messages(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    i = 0
    while len(out) < n:
        out += [
            {"role": "user", "content": f"Step {i}: look at src/mod_{i}.py please", "id": f"u{i}"},
            {
                "role": "assistant",
                "content": None,
                "id": f"a{i}",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "read", "arguments": json.dumps({"p": i})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": "code\n" * 40, "id": f"t{i}"},
            {"role": "assistant", "content": f"mod_{i} looks fine.", "id": f"r{i}"},
        ]
        i += 1
    return out[:n]


async def run(url: str, requests: int) -> list[list[object]]:
    from app.core.settings import load_settings
    from app.main import create_app

    app = create_app(load_settings(), database_url=url)
    rows: list[list[object]] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as c:
            await c.put("/sessions/b", json={"system_prompt": "Be brief."})
            seed = _messages(300)
            for k in range(0, len(seed), 100):
                r = await c.post("/sessions/b/messages", json={"messages": seed[k : k + 100]})
                assert r.status_code == 201, r.text
            calls: dict[str, Any] = {
                "GET /messages?limit=100": lambda n: c.get("/sessions/b/messages?limit=100"),
                "GET /context": lambda n: c.get("/sessions/b/context"),
                "POST /context": lambda n: c.post(
                    "/sessions/b/context", json={"dynamic_context": ["goal"], "max_tokens": 8000}
                ),
                "POST /messages (1)": lambda n: c.post(
                    "/sessions/b/messages",
                    json={"messages": [{"role": "user", "content": f"more {n}", "id": f"x{n}"}]},
                ),
            }
            for name, make in calls.items():
                for n in range(10):  # warm-up
                    await make(-n - 1)
                times: list[float] = []
                for n in range(requests):
                    start = time.perf_counter()
                    r = await make(n)
                    times.append((time.perf_counter() - start) * 1000)
                    assert r.status_code < 300, r.text
                rows.append([name, requests, percentile(times, 50), percentile(times, 95)])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("CONTEXTD_DATABASE_URL"))
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from app.db.engine import run_migrations

    with throwaway_database(args.database_url, "contextd_api_bench") as db:
        run_migrations(db.url)
        rows = asyncio.run(run(db.url, args.requests))
    import app

    print(f"code: {Path(app.__file__).resolve().parents[1]}")
    print(markdown_table(["request", "n", "p50 ms", "p95 ms"], rows))
    if args.json:
        args.json.write_text(json.dumps(rows))


if __name__ == "__main__":
    main()
