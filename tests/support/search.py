"""Appends and recall searches over HTTP (SPEC §2 `/search`), and what a search found."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.messages import call, result


async def append(c: httpx.AsyncClient, sid: str, *msgs: dict[str, Any]) -> None:
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": list(msgs)})
    assert r.status_code in (200, 201), r.text


async def search(c: httpx.AsyncClient, sid: str, q: str, **params: Any) -> dict[str, Any]:
    r = await c.get(f"/sessions/{sid}/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def searched_before(
    c: httpx.AsyncClient, sid: str, code: str, times: int, holder: int, tool: str
) -> None:
    """The model searched for `code` `times` times through the recall tool: each call and
    the answer quoting it (the message at seq `holder`, an output of `tool`)."""
    for k in range(times):
        await append(
            c,
            sid,
            call(f"r{k}", "recall", f'{{"query": "{code}"}}'),
            result(f"r{k}", f"1 messages match '{code}':\nseq {holder} ({tool}): {code}"),
        )


def seqs(found: dict[str, Any]) -> list[int]:
    return [h["seq"] for h in found["hits"]]


def lint_output(lines: int) -> str:
    """A linter's output: `lines` warnings on other files, then the one error asked for."""
    out = [f"src/pkg/mod{i}.py:{i}:1: W0001 unused import os (unused-import)" for i in range(lines)]
    out.append("src/app/special_handler.py:12:4: E1101 Instance has no 'run' member (no-member)")
    return "\n".join(out)
