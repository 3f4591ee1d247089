"""Content parts of a chat message: the kinds contextd takes and what each must hold.

One rule for every place a message enters: an append, a budget preview, a token
count, and the `system` and `dynamic_context` messages of a context request (which
are rendered into every format and were copied into payloads unchecked).
"""

from __future__ import annotations

from collections.abc import Sequence

# Part type -> (the key that holds its value, that value's type).
PART_TYPES: dict[str, tuple[str, type]] = {
    "text": ("text", str),
    "image_url": ("image_url", dict),
    "input_audio": ("input_audio", dict),
    "file": ("file", dict),
    "refusal": ("refusal", str),
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
        if role in ("tool", "system") and ptype != "text":
            problems.append((f"{loc}.type", f"{role} messages take only text parts"))
            continue
        key, kind = PART_TYPES[ptype]
        if not isinstance(part.get(key), kind):
            expected = "a string" if kind is str else "an object"
            problems.append((f"{loc}.{key}", f"must be {expected}"))
    return problems
