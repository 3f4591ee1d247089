"""What PostgreSQL's JSONB cannot hold, found before it reaches the database.

JSONB rejects NUL characters and non-finite numbers, and UTF-8 cannot encode
lone surrogates (legal in JSON as `\\ud800`). Left alone, each would surface as
a driver error, a 500, halfway through a write; here they become a 422 that
names the field.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator

MAX_DEPTH = 64


def storable_problem(value: Any, loc: str, depth: int = 0) -> tuple[str, str] | None:
    """The first (loc, msg) that cannot be stored as JSONB, or None."""
    return _problem(value, loc, depth, stored=True)


def sendable_problem(value: Any, loc: str) -> tuple[str, str] | None:
    """The first (loc, msg) of a request's own JSON that is not stored but is hashed,
    counted and sent on to the model (a context call's tools and dynamic context), or
    None: the rules of stored JSON but for NUL characters and large integers, which JSON
    carries. A lone surrogate cannot be encoded, a non-finite number is not JSON, and
    nesting is held to what a session's stored tools may have."""
    return _problem(value, loc, 0, stored=False)


def _problem(value: Any, loc: str, depth: int, *, stored: bool) -> tuple[str, str] | None:
    if depth > MAX_DEPTH:
        return loc, f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        return _string_problem(value, loc, stored)
    if isinstance(value, float) and not math.isfinite(value):
        return loc, "numbers must be finite"
    if stored and isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**300:
        return loc, "number too large"
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{loc}.{k}" if loc else str(k)
            found = _string_problem(k, sub, stored) or _problem(v, sub, depth + 1, stored=stored)
            if found:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found = _problem(v, f"{loc}[{i}]", depth + 1, stored=stored)
            if found:
                return found
    return None


def _string_problem(s: str, loc: str, stored: bool = True) -> tuple[str, str] | None:
    if stored and "\x00" in s:
        return loc, "contains a NUL character (\\u0000), which cannot be stored"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return loc, "contains a lone UTF-16 surrogate, which is not valid Unicode"
    return None


def _storable(value: str) -> str:
    problem = storable_problem(value, "")
    if problem is not None:
        raise ValueError(problem[1])
    return value


def storable_text(text: str) -> str:
    """`text` the database can hold, for text no client sent and none can be asked to
    fix (a model's answer): NUL dropped, lone surrogates replaced by U+FFFD. In a
    summary they made the store fail, and every later compaction of the session."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


# A string of client input that reaches the database: PostgreSQL text cannot hold
# NUL, and UTF-8 cannot encode lone surrogates; left alone either would fail inside
# the driver as a 500. Refused at the edge with a 422 naming the field.
StoredStr = Annotated[str, AfterValidator(_storable)]


def json_number(value: Any) -> Any:
    """A `field_validator(mode="before")` for numbers of request bodies: pydantic's lax mode
    reads "10" as 10 and true as 1, and JSON says a number with a number. (Strict mode
    would also refuse 9000.0, which JSON does not tell from 9000; and a validator in the
    type itself would hide the field's bounds from its JSON schema.)"""
    if isinstance(value, bool | str | bytes):
        raise ValueError("must be a JSON number")
    return value
