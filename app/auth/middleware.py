"""Bearer-key authentication, ahead of routing, body limits and validation.

A request without a valid key learns nothing but 401: not whether the path
exists, not whether its body would have been too large or invalid.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.docs_ui import is_public_docs_path
from app.auth.keys import Keyring
from app.console.assets import is_public_path as is_console_page
from app.core.errors import problem
from app.db.driver_errors import is_unavailable

PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})


class Authenticate:
    def __init__(self, app: ASGIApp, keyring: Keyring) -> None:
        self.app = app
        self.keyring = keyring

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        public = path in PUBLIC_PATHS or is_console_page(path) or is_public_docs_path(path)
        if scope["type"] != "http" or public:
            await self.app(scope, receive, send)
            return
        try:
            if await self.keyring.enabled():
                tenant = None
                key = _bearer(scope)
                if key:
                    tenant = await self.keyring.tenant_for(key)
                if tenant is None:
                    await _answer(
                        send,
                        401,
                        "unauthorized",
                        "Unauthorized",
                        "a valid API key is required: Authorization: Bearer <key>",
                        [(b"www-authenticate", b"Bearer")],
                    )
                    return
                scope.setdefault("state", {})["tenant"] = tenant
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            await _answer(
                send,
                503,
                "unavailable",
                "Service unavailable",
                "the database is unreachable; retry",
                [(b"retry-after", b"2")],
            )
            return
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = bytes(value).decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return str(token.strip())
    return None


async def _answer(
    send: Send, status: int, code: str, title: str, detail: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(problem(status, code, title, detail)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
