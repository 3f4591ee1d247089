"""Every limit and enum a request is held to, defined once.

The pydantic schemas of the OpenAPI description (`app/api/models/requests.py`,
`app/sessions/schemas.py`, the routes' `Query`/`Path` declarations), the
hand-written validators (`app/context/validation.py`,
`app/messages/validation.py`) and the lanes (`app/api/lanes.py`) read these
names, so the description and what the server accepts cannot drift apart:
`tests/api/test_limits.py` sends each bound, and one past it, to the server and
compares the answer with the description.

This module imports nothing of contextd: every layer may read it.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

# A session id (SPEC §1): 1–128 characters of [A-Za-z0-9._:-], but not "." or "..".
# Clients put it in URLs, hence the narrow alphabet; URL clients rewrite "." and ".."
# path segments, so no client could reach such a session. Spelled without a lookahead,
# which the schema's regex engine lacks.
SESSION_ID_PATTERN: Final = (
    r"^(?:[A-Za-z0-9._:-]{3,128}|[A-Za-z0-9._:-]?[A-Za-z0-9_:-]|[A-Za-z0-9_:-]\.)$"
)

# Any token quantity a client gives: a context request's `max_tokens`,
# `reserve_output_tokens` and `preview_limit_tokens`, a session's `context_limit`,
# a usage report's counts. Far above any model's window; it keeps arithmetic and
# the database's integer columns far from overflow.
TOKENS_MAX: Final = 100_000_000
# A tool output's preview keeps a head and a tail; below this there is no room for both.
PREVIEW_TOKENS_MIN: Final = 64

Role = Literal["system", "user", "assistant", "tool"]
ROLES: Final[tuple[Role, ...]] = get_args(Role)

Mode = Literal["chat", "agent", "run"]
MODES: Final[tuple[Mode, ...]] = get_args(Mode)

Format = Literal["openai", "responses", "anthropic"]
FORMATS: Final[tuple[Format, ...]] = get_args(Format)
DEFAULT_FORMAT: Final[Format] = "openai"

STRATEGY_NAME_MAX: Final = 100
MODEL_NAME_MAX: Final = 200
LOCK_TOKEN_MAX: Final = 200
LEASE_OWNER_MAX: Final = 200
LEASE_TTL_MAX_S: Final = 24 * 3600
MESSAGE_ID_MAX: Final = 256

# A prefix_id grows by 9 characters per head message (system, dynamic items, summary).
PREFIX_ID_MAX: Final = 16384
# Prefix ids are printable ASCII. In a query, anything else is percent-encoded at up
# to 12 bytes a character, and 16,384 of them made a request line the HTTP server
# refuses (over 80 KB: a bare 400 before the app sees it; `make fuzz` found it).
PREFIX_ID_PATTERN: Final = r"^[!-~]*$"

# Session settings.
SYSTEM_PROMPT_MAX: Final = 1_000_000
TOOLS_MAX: Final = 512
ANCHORS_MAX: Final = 200
ANCHOR_MAX: Final = 2048
# OpenAI's rule for a function tool's name.
FUNCTION_NAME_PATTERN: Final = r"^[a-zA-Z0-9_-]{1,64}$"

# Seqs and event ids are PostgreSQL bigints.
BIGINT_MAX: Final = 2**63 - 1

# Listing pages: an opaque session-list cursor, an event-type prefix.
CURSOR_MAX: Final = 400
EVENT_TYPE_MAX: Final = 100
# The longest a `POST /compact` with `wait` may wait, in seconds.
COMPACT_WAIT_MAX_S: Final = 600

# The most hits one search answers (GET /sessions/{id}/search, the MCP search tool).
SEARCH_LIMIT_MAX: Final = 50

# Reading the log by the seqs a summary cites (`seqs=3,7-9`, app/messages/ranges.py):
# the longest such citation and the most ranges in it.
SEQS_MAX_CHARS: Final = 2000
SEQS_MAX_RANGES: Final = 100
# A range read by a model (the recall tool, MCP `read_messages`): at most this many
# messages and this many characters of text, so one call cannot flood its context.
RANGE_READ_MESSAGES: Final = 50
RANGE_READ_CHARS: Final = 20_000
