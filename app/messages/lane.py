"""The append's own lane: `POST /sessions/{id}/messages` answered ahead of the router.

Appends are most of a busy server's requests, and the framework around them cost
more CPU than the append: Starlette's exception middleware and router, then
FastAPI's request wrapper, `Request` object, body reading, dependency solving
for the path parameter and validation of the body against `dict[str, Any]`
(a walk of the whole body). What lanes share, and the rules they keep, are in
app/api/lanes.py. This one takes a path whose session id matches the route's
pattern, no content type or a JSON one, and a body that decodes, as Starlette
decodes it, to a JSON object. Everything else (a bad id, a form, malformed JSON,
an array) goes on to the router unchanged, whose answer, a 422 naming the field,
is the one clients already get.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import lanes
from app.api.errors import error_response
from app.errors import invalid
from app.jsonsafe import storable_problem
from app.messages import service
from app.sessions.schemas import SESSION_ID_PATTERN

PATH = "/sessions/{session_id}/messages"
_PATH = re.compile("/sessions/(" + SESSION_ID_PATTERN.strip("^$") + ")/messages")


async def answer(
    state: Any, tenant: str, session_id: str, body: dict[str, Any]
) -> tuple[int, bytes]:
    """The append route's work, for the route and the lane alike: (status, JSON body)."""
    lock_token = body.get("lock_token")
    if lock_token is not None and not isinstance(lock_token, str):
        raise invalid("lock_token", "must be a string")
    if isinstance(lock_token, str) and storable_problem(lock_token, "lock_token"):
        raise invalid("lock_token", "must not contain NUL characters or lone surrogates")
    unknown = sorted(set(body) - {"messages", "lock_token"})
    if unknown:
        raise invalid(unknown[0], "is not a field of an append")
    result = await service.append(
        state.database,
        tenant,
        session_id,
        body.get("messages"),
        lock_token,
        state.settings,
        getattr(state, "append_groups", None),
    )
    runner = getattr(state, "compactions", None)
    if (
        runner is not None
        and result.created
        and result.auto_compact
        and result.budget.status == "compact_needed"
        and not result.job_active
    ):
        await runner.on_compact_needed(tenant, session_id, lock_token)
    # Plain ints and strings: encoded here, not walked by a response model.
    content = json.dumps({"messages": result.messages, "budget": result.budget.as_dict()})
    return (201 if result.created else 200), content.encode()


class AppendLane:
    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.api = api  # its state: settings, database, compaction runner
        self.route: APIRoute | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _PATH.fullmatch(scope["path"]) if scope["type"] == "http" else None
        if match is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        parsed = await lanes.json_request(self.app, scope, receive, send)
        if parsed is None:
            return
        scope["route"] = self.route or self._find_route()
        try:
            status, content = await answer(self.api.state, lanes.tenant_of(scope), match[1], parsed)
        except Exception as exc:
            await error_response(exc)(scope, receive, send)
            return
        await lanes.send_json(send, status, content)

    def _find_route(self) -> APIRoute:
        # Imported here: the router's own handler calls `answer` of this module.
        from app.messages.router import router

        self.route = lanes.find_route(router, PATH, "POST")
        return self.route
