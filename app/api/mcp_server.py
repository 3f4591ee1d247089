"""`/mcp`'s server: recall (search, read a message or a cited range) and the budget as Model Context
Protocol tools. Imported by `app/api/mcp.py` on the first request to `/mcp`.

Served by the official `mcp` SDK's Streamable HTTP transport, stateless and with
JSON answers: every request stands alone, so any `contextd serve` process (or
`--workers` child) answers any request, and nothing lives in one process's
memory between calls. The route sits behind the app's own middleware: the same
API keys, and each tool call acts for the tenant of the key that sent it; another
tenant's session is "not found", exactly as over HTTP.

The SDK's own DNS-rebinding check (Host header) is off: contextd answers the rest
of its API on any Host, with keys when it listens beyond loopback (SPEC §8), and
`/mcp` is no different.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field

from app.api.mcp import PATH
from app.core.budget import budget_of
from app.core.errors import ContextdError, invalid
from app.core.limits import (
    BIGINT_MAX,
    RANGE_READ_CHARS,
    RANGE_READ_MESSAGES,
    SEARCH_LIMIT_MAX,
    SESSION_ID_PATTERN,
)
from app.core.recall_tool import READ_DESCRIPTION, READ_RANGE_DESCRIPTION, SEARCH_DESCRIPTION
from app.db.models import DEFAULT_TENANT
from app.messages import ranges
from app.search import service
from app.sessions import service as sessions

# The rule of every session id in a URL (app/core/limits.py): what cannot be a session is
# refused before any lookup, as on the HTTP routes.
SessionArg = Annotated[str, Field(description="the session id", pattern=SESSION_ID_PATTERN)]
# Seqs and offsets within what the log can hold, as the HTTP routes bound them: a larger
# one is refused by name, not sent to PostgreSQL (bigint) to fail there.
Seq = Annotated[int, Field(ge=1, le=BIGINT_MAX)]
Offset = Annotated[int | None, Field(ge=0, le=BIGINT_MAX)]
Line = Annotated[int | None, Field(ge=1, le=BIGINT_MAX)]


def _json_value(value: Any) -> Any:
    """Timestamps as the HTTP API writes them (ISO 8601)."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def build(app: FastAPI) -> MCPServer:
    """The MCP server of `app`, its session manager made (`app/api/mcp.py` runs it)."""
    server = MCPServer(
        "contextd",
        instructions=(
            "Recall for one contextd session: search its whole log (messages the "
            "payload left out or compaction summarised included), read one message "
            "in full, read the messages a summary item cites ([#412-431]), and read "
            "the session's budget."
        ),
    )

    def tenant_of(ctx: Context) -> str:
        request = ctx.request_context.request
        state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
        return str(state.get("tenant") or DEFAULT_TENANT)

    @server.tool(name="search", description=SEARCH_DESCRIPTION)
    async def search(
        session_id: SessionArg,
        query: Annotated[str, Field(description="words, identifiers or a phrase")],
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=SEARCH_LIMIT_MAX)] = 5,
        before_seq: Annotated[int | None, Field(ge=1, le=BIGINT_MAX)] = None,
        roles: list[str] | None = None,
    ) -> str:
        try:
            found = await service.search(
                app.state.database,
                tenant_of(ctx),
                session_id,
                service.check_query(query, field="query"),
                limit=limit,
                before_seq=before_seq,
                roles=service.check_roles(roles),
            )
        except ContextdError as exc:
            raise ToolError(str(exc)) from exc
        return json.dumps(found.as_dict(session_id, query), ensure_ascii=False)

    @server.tool(name="read_message", description=READ_DESCRIPTION)
    async def read_message(
        session_id: SessionArg,
        seq: Seq,
        ctx: Context,
        char_start: Offset = None,
        char_end: Offset = None,
        line_start: Line = None,
        line_end: Line = None,
    ) -> str:
        try:
            out = await ranges.read_one(
                app.state.database,
                tenant_of(ctx),
                session_id,
                seq,
                char_start=char_start,
                char_end=char_end,
                line_start=line_start,
                line_end=line_end,
            )
        except ContextdError as exc:
            raise ToolError(str(exc)) from exc
        return json.dumps(out, ensure_ascii=False, default=_json_value)

    @server.tool(name="read_messages", description=READ_RANGE_DESCRIPTION)
    async def read_messages(
        session_id: SessionArg,
        ctx: Context,
        seqs: Annotated[
            str | None,
            Field(description='as a summary cites them: "412-431" or "3,7-9"'),
        ] = None,
        from_seq: Annotated[int | None, Field(ge=1, le=BIGINT_MAX)] = None,
        to_seq: Annotated[int | None, Field(ge=1, le=BIGINT_MAX)] = None,
    ) -> str:
        try:
            if seqs is None and from_seq is None:
                raise invalid("seqs", 'give seqs ("412-431") or from_seq')
            async with app.state.database.transaction() as s:
                row = await sessions.get_session(s, tenant_of(ctx), session_id)
                page = await ranges.read(
                    s,
                    tenant_of(ctx),
                    row,
                    limit=RANGE_READ_MESSAGES,
                    from_seq=from_seq,
                    to_seq=to_seq,
                    seqs=seqs,
                    max_chars=RANGE_READ_CHARS,
                )
        except ContextdError as exc:
            raise ToolError(str(exc)) from exc
        out = {"session_id": session_id, **page.as_dict()}
        return json.dumps(out, ensure_ascii=False, default=_json_value)

    @server.tool(name="budget", description="The session's budget status (tokens now, limits).")
    async def budget(session_id: SessionArg, ctx: Context) -> str:
        try:
            async with app.state.database.transaction() as s:
                row = await sessions.get_session(s, tenant_of(ctx), session_id)
                status: dict[str, Any] = budget_of(row, app.state.settings).as_dict()
        except ContextdError as exc:
            raise ToolError(str(exc)) from exc
        return json.dumps(status)

    # The SDK's session manager is made by `streamable_http_app()`; its Starlette app is
    # not used: `app/api/mcp.py`'s route hands requests to the manager.
    server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server
