"""The house's figures, read off the code: docs/layers.md cites them.

    python docs/floor_plan.py            # the plan: rooms, floors, arrows, loops
    python docs/floor_plan.py --routes   # the hot routes' files, call by call (needs
                                         # CONTEXTD_DATABASE_URL: one append, one payload)

A *room* is a package of `app/` (a folder under it) or a module at its top; an *arrow*
is one room importing another (TYPE_CHECKING imports included); a room's *floor* is one
above the highest room it imports (the ground is 1), rooms that import each other in a
loop sharing one floor; an arrow *runs back up* when it reaches a room on its own floor
or above. Run from a checkout's root with that checkout's interpreter: the same script
measures any commit, so two commits are compared by one command.

`--routes` follows one request of each hot route in process (the app and its lifespan,
an httpx ASGI client, a session of a few messages), after a first call of each has
warmed what is cached: the files of `app/` its Python calls enter, in order, and how
often a call goes back to a file the request had already left (a *return*).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

import grimp

ROOT = Path.cwd()


def room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def loops(nodes: Iterable[str], edges: dict[str, set[str]]) -> dict[str, int]:
    """Each node's strongly connected component (Tarjan), as a number."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comp: dict[str, int] = {}

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            n = len(set(comp.values()))
            while True:
                w = stack.pop()
                on.discard(w)
                comp[w] = n
                if w == v:
                    break

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return comp


def module_loops(graph: grimp.ImportGraph) -> list[list[str]]:
    """The modules of app/ that import each other in a loop, each loop sorted."""
    edges = {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith("app.")}
        for m in graph.modules
    }
    comp = loops(edges, edges)
    members: dict[int, list[str]] = {}
    for m, c in comp.items():
        members.setdefault(c, []).append(m)
    return sorted(sorted(ms) for ms in members.values() if len(ms) > 1)


def plan() -> None:
    graph = grimp.build_graph("app", exclude_type_checking_imports=False, cache_dir=None)
    rooms = {room(m) for m in graph.modules if m != "app"}
    edges: dict[str, set[str]] = {r: set() for r in rooms}
    for m in graph.modules:
        for imported in graph.find_modules_directly_imported_by(m):
            if not imported.startswith("app."):
                continue
            a, b = room(m), room(imported)
            if a != b and a in rooms:
                edges[a].add(b)
    comp = loops(rooms, edges)
    floor: dict[int, int] = {}

    def floor_of(c: int) -> int:
        if c not in floor:
            floor[c] = 0  # a loop's rooms share a floor
            below = [
                floor_of(comp[b]) for a in rooms if comp[a] == c for b in edges[a] if comp[b] != c
            ]
            floor[c] = 1 + max(below, default=0)
        return floor[c]

    floors = {r: floor_of(comp[r]) for r in rooms}
    arrows = sum(len(v) for v in edges.values())
    back_up = sorted((a, b) for a in rooms for b in edges[a] if floors[b] >= floors[a])
    print(f"rooms {len(rooms)}, floors {max(floors.values())}, arrows {arrows}")
    print(f"arrows that run back up: {len(back_up)} {back_up}")
    print(f"modules in import loops: {sum(len(ms) for ms in module_loops(graph))}")
    for f in sorted(set(floors.values()), reverse=True):
        print(f"floor {f:2}: " + ", ".join(sorted(r for r in rooms if floors[r] == f)))


class Trace:
    """The files of app/ a request's Python calls enter, in order."""

    def __init__(self) -> None:
        self.files: list[str] = []
        self.app = str(ROOT / "app") + os.sep

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        name = frame.f_code.co_filename
        if name.startswith(self.app):
            short = name[len(str(ROOT)) + 1 :]
            if not self.files or self.files[-1] != short:
                self.files.append(short)

    def report(self, label: str) -> None:
        seen: set[str] = set()
        order: list[str] = []
        returns = 0
        for i, f in enumerate(self.files):
            if f in seen and self.files[i - 1] != f:
                returns += 1
            if f not in seen:
                order.append(f)
            seen.add(f)
        print(f"{label}: {len(order)} files, {len(self.files) - 1} moves, {returns} returns")
        print("  " + " -> ".join(order))


def settings_module() -> Any:
    # Either layout: the plan measures commits from before the move too.
    for name in ("app.core.settings", "app.settings"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise SystemExit("no app settings module found")


async def routes() -> None:
    import httpx

    from app.main import create_app

    url = os.environ["CONTEXTD_DATABASE_URL"]
    settings = settings_module().load_settings()
    app = create_app(settings, database_url=url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            sid = f"floor-plan-{uuid.uuid4().hex[:8]}"
            step = {"messages": [{"role": "user", "content": "read the config file"}]}
            for _ in range(3):
                (await c.post(f"/sessions/{sid}/messages", json=step)).raise_for_status()
                (await c.get(f"/sessions/{sid}/context")).raise_for_status()
            for label, method, path in (
                ("append", "POST", f"/sessions/{sid}/messages"),
                ("payload", "GET", f"/sessions/{sid}/context"),
            ):
                body = step if method == "POST" else None
                trace = Trace()
                sys.setprofile(trace)
                try:
                    answer = await c.request(method, path, json=body)
                finally:
                    sys.setprofile(None)
                answer.raise_for_status()
                trace.report(label)
            await c.delete(f"/sessions/{sid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routes", action="store_true", help="the hot routes' files")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.routes:
        if not os.environ.get("CONTEXTD_DATABASE_URL"):
            raise SystemExit("--routes needs CONTEXTD_DATABASE_URL")
        # Migrated as users migrate, by the command line of the commit under test.
        subprocess.run([sys.executable, "-m", "app.cli", "migrate"], check=True)
        asyncio.run(routes())
    else:
        plan()


if __name__ == "__main__":
    main()
