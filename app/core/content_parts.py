"""Content parts of a chat message: the kinds contextd takes and what each must hold.

One rule for every place a message enters: an append, a budget preview, a token
count, and the `system` and `dynamic_context` messages of a context request (which
are rendered into every format and were copied into payloads unchecked).
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Sequence

# Part type -> (the key that holds its value, that value's type).
PART_TYPES: dict[str, tuple[str, type]] = {
    "text": ("text", str),
    "image_url": ("image_url", dict),
    "input_audio": ("input_audio", dict),
    "file": ("file", dict),
    "refusal": ("refusal", str),
}


# The part types each role takes, as the Chat Completions API takes them.
ROLE_PARTS: dict[str, tuple[str, ...]] = {
    "system": ("text",),
    "tool": ("text",),
    "assistant": ("text", "refusal"),
    "user": ("text", "image_url", "input_audio", "file"),
}


def part_problems(content: Sequence[object], role: str) -> list[tuple[str, str]]:
    """(location under `content`, message) for each part that is not one contextd takes.

    The type is compared as a string first: a list or an object there is unhashable
    and made the lookup itself fail with a 500."""
    problems: list[tuple[str, str]] = []
    for j, part in enumerate(content):
        loc = f"[{j}]"
        if not isinstance(part, dict):
            problems.append((loc, "must be a content part object"))
            continue
        ptype = part.get("type")
        if not isinstance(ptype, str) or ptype not in PART_TYPES:
            problems.append((f"{loc}.type", f"must be one of {', '.join(PART_TYPES)}"))
            continue
        allowed = ROLE_PARTS.get(role)
        if allowed is not None and ptype not in allowed:
            problems.append(
                (f"{loc}.type", f"{role} messages take only {' and '.join(allowed)} parts")
            )
            continue
        key, kind = PART_TYPES[ptype]
        value = part.get(key)
        if not isinstance(value, kind):
            expected = "a string" if kind is str else "an object"
            problems.append((f"{loc}.{key}", f"must be {expected}"))
        elif isinstance(value, dict):
            problem = _inner_problem(ptype, value)
            if problem:
                problems.append((f"{loc}.{key}{problem[0]}", problem[1]))
    return problems


def _inner_problem(ptype: str, value: dict[str, object]) -> tuple[str, str] | None:
    """What a provider refuses inside a part: an image with nothing to show, audio
    without its data or format, a file that names none. Stored, such a part made every
    later payload that kept its message fail at the provider."""

    def text(key: str) -> bool:
        return isinstance(value.get(key), str) and bool(str(value.get(key)))

    if ptype == "image_url" and not (text("url") or text("file_id")):
        return ".url", "is required (a URL, a data URL, or a file_id)"
    if ptype == "input_audio":
        for key in ("data", "format"):
            if not text(key):
                return f".{key}", "is required"
        if not is_base64(str(value["data"])):
            return ".data", "must be base64 (A-Z, a-z, 0-9, +, /, padded with = to a multiple of 4)"
    if ptype == "file" and not any(text(k) for k in ("file_data", "file_id", "file_url")):
        return ".file_data", "is required (or file_id, file_url)"
    for key in ("url", "file_data"):
        if text(key) and not base64_data_url_ok(str(value[key])):
            return f".{key}", "is a base64 data URL whose data is empty or not base64"
    return None


# A data URL that says it is base64: `data:[type][;param=value]*;base64,DATA`.
_BASE64_DATA_URL = re.compile(r"^data:[^,]*;base64,", re.IGNORECASE)


def base64_data_url_ok(url: str) -> bool:
    """False for a data URL that says base64 and holds something else. Stored, its data
    reached every provider that decodes it (Anthropic's format sniffs the image type from
    the bytes), and every payload keeping its message failed."""
    found = _BASE64_DATA_URL.match(url)
    return found is None or (len(url) > found.end() and is_base64(url[found.end() :]))


def is_base64(data: str) -> bool:
    """Standard base64, padded, nothing else in it: what providers decode."""
    if not data.isascii():
        return False
    try:
        binascii.a2b_base64(data, strict_mode=True)
    except binascii.Error:
        return False
    return True
