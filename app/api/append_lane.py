"""The one entrance of `POST /sessions/{id}/messages` (app/api/lanes.py says why).

Appends are most of a busy server's requests, and the framework around them cost
more CPU than the append: Starlette's exception middleware and router, then
FastAPI's request wrapper, `Request` object, body reading, dependency solving
for the path parameter and validation of the body against `dict[str, Any]` (a
walk of the whole body). The route in app/api/messages.py documents it.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope

from app.api import lanes
from app.api.messages import router
from app.messages import service

PATH = "/sessions/{session_id}/messages"


class AppendLane(lanes.Lane):
    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        super().__init__(app, api, router, PATH, ("POST",))

    async def answer(
        self, services: lanes.Services, scope: Scope, receive: Receive, tenant: str, sid: str
    ) -> tuple[int, bytes]:
        body = lanes.json_object(scope, await lanes.read_body(receive))
        return await service.append_request(
            services.database,
            services.settings,
            services.append_groups,
            services.compactions,
            tenant,
            sid,
            body,
        )
