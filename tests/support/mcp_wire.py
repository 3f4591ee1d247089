"""One MCP request on the wire, for a test or bench that needs no SDK client: the
`initialize` call a client opens with, and the Accept header Streamable HTTP asks for."""

from __future__ import annotations

from typing import Any

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "contextd-tests", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream"}
