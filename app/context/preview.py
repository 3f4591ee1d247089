"""What the model is sent instead of a message too big for its budget.

- `sanitize`: only OpenAI protocol fields leave the service; unknown stored
  fields stay in the log.
- `preview_tool`: a tool output over the limit becomes head + tail + size and
  the path of the full message, within the limit.
- `cut_text`: a long user/assistant text becomes its head plus its key lines
  (constraints, decisions, paths) and the path of the full message.

Previews are sized from the message's own chars-per-token ratio and then
counted exactly, so a Chinese output and an English one both land just under
the limit, and the accounting stays exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from app.context.lru import LRU
from app.context.scoring import key_line_starts
from app.context.types import TokenCounter
from app.core.conversation import content_text

_FIELDS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "refusal"}),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
_CALL_FIELDS = frozenset({"id", "type", "function"})
_FUNCTION_FIELDS = frozenset({"name", "arguments"})
_SHRINK_ATTEMPTS = 4
# A cut assistant message keeps its tool calls (ids, names, every argument key and every
# short value: the paths, patterns and commands that say what it did). Its long values (a
# file's contents, the two sides of an edit, a to-do list) share this many characters per
# call, each keeping its head and saying where the rest is, so that a masked call costs
# about as much whatever its tool's arguments look like: in a coding agent's run, edits
# with two long sides and to-do lists never cut were most of what its masked steps cost.
CALL_VALUE_CHARS = 240
# Key lines are looked for this far into a text: a cut must stay cheap on a
# pasted megabyte, and its lines beyond this would not fit anyway.
_KEY_SCAN_CHARS = 4_000


def message_path(session_id: str, seq: int) -> str:
    return f"/sessions/{session_id}/messages/{seq}"


def _clean_call(call: Any) -> Any:
    if not isinstance(call, dict):
        return call
    fn = call.get("function")
    if call.keys() <= _CALL_FIELDS and (not isinstance(fn, dict) or fn.keys() <= _FUNCTION_FIELDS):
        return call
    out = {k: v for k, v in call.items() if k in _CALL_FIELDS}
    if isinstance(fn, dict):
        out["function"] = {k: v for k, v in fn.items() if k in _FUNCTION_FIELDS}
    return out


def needs_sanitize(body: Mapping[str, Any]) -> bool:
    allowed = _FIELDS.get(str(body.get("role")), _FIELDS["user"])
    if not body.keys() <= allowed:
        return True
    calls = body.get("tool_calls")
    if calls is None:
        return body.get("role") == "assistant" and body.get("content") is None
    return not calls or any(_clean_call(c) is not c for c in calls)


def sanitize(body: Mapping[str, Any], *, strip_tool_calls: bool = False) -> dict[str, Any]:
    """A copy of `body` with only the protocol fields of its role."""
    allowed = _FIELDS.get(str(body.get("role")), _FIELDS["user"])
    out = {k: v for k, v in body.items() if k in allowed}
    calls = out.get("tool_calls")
    if strip_tool_calls or (calls is not None and not calls):
        # OpenAI rejects an empty tool_calls array; an unanswered call is stripped.
        out.pop("tool_calls", None)
    elif calls is not None:
        out["tool_calls"] = [_clean_call(c) for c in calls]
    if out.get("role") == "assistant" and out.get("content") is None and "tool_calls" not in out:
        out["content"] = ""
    return out


def _fit(
    base: dict[str, Any],
    build: Callable[[int], str],
    budget_chars: int,
    limit: int,
    counter: TokenCounter,
) -> tuple[dict[str, Any], int] | None:
    """Shrinks `build(chars)` until the message counts within `limit`; the message and its count."""
    chars = budget_chars
    for _ in range(_SHRINK_ATTEMPTS):
        if chars <= 0:
            return None
        candidate = {**base, "content": build(chars)}
        used = counter.count_message(candidate)
        if used <= limit:
            return candidate, used
        chars = int(chars * limit / used * 0.9)
    return None


# Previews and cuts of the same message are asked for on every call of an agent
# (`Caches.previews`). Each is a function of exactly its key (the text enters only
# through the part it reads, its length and its token count), so a hit can never show
# one session another's text.
PreviewCache = LRU[tuple[Any, ...], tuple[dict[str, Any], int]]


def preview_tool(
    body: Mapping[str, Any],
    *,
    seq: int,
    session_id: str,
    limit: int,
    token_count: int,
    counter: TokenCounter,
    cache: PreviewCache,
) -> tuple[dict[str, Any], int]:
    """Head, tail and size of a tool output, with the path of the full message; and its count."""
    text = content_text(body)
    ratio = len(text) / max(token_count, 1)
    span = int(limit * ratio) + 1
    key = (counter.name, session_id, seq, limit, token_count, body.get("tool_call_id"),
           len(text), text[:span], text[-span:])  # fmt: skip
    hit = cache.get(key)
    if hit is not None:
        return dict(hit[0]), hit[1]
    header = (
        f"[tool output preview: {len(text)} chars, {token_count} tokens; "
        f"full output: GET {message_path(session_id, seq)}]"
    )
    base = sanitize(body)
    base["content"] = header
    base_tokens = counter.count_message(base)
    room = limit - base_tokens

    def build(chars: int) -> str:
        head_chars = chars * 3 // 5
        tail_chars = chars - head_chars
        omitted = len(text) - head_chars - tail_chars
        return (
            f"{header}\n{text[:head_chars]}\n[… {omitted} chars omitted …]\n"
            f"{text[len(text) - tail_chars :]}"
        )

    fitted = _fit(base, build, int((room - 12) * ratio * 0.95), limit, counter)
    result = fitted if fitted is not None else (base, base_tokens)
    cache.put(key, result)
    return dict(result[0]), result[1]


# A line kept by `lines_tool` is cut past this many characters (a minified file's line).
LINE_CHARS = 240


def lines_tool(
    body: Mapping[str, Any],
    *,
    seq: int,
    session_id: str,
    names: frozenset[str],
    limit: int,
    token_count: int,
    counter: TokenCounter,
    cache: PreviewCache,
) -> tuple[dict[str, Any], int]:
    """A tool output cut to the lines that hold `names` (what later steps refer to), with
    its size and the path of the full message, within `limit`; and its count. The line
    first naming each of them comes first, then the others, in the output's order.
    Sent as logged when that is no larger."""
    text = content_text(body)
    key = ("lines", counter.name, session_id, seq, limit, token_count, len(text), names)
    hit = cache.get(key)
    if hit is not None:
        return dict(hit[0]), hit[1]
    lines = text.splitlines()
    holding = [i for i, line in enumerate(lines) if any(n in line for n in names)]
    first: list[int] = []
    for name in sorted(names):
        at = next((i for i in holding if name in lines[i]), None)
        if at is not None and at not in first:
            first.append(at)
    order = sorted(first) + [i for i in holding if i not in first]
    base = sanitize(body)

    def build(chars: int) -> str:
        taken: list[int] = []
        used = 0
        for i in order:
            line = lines[i][:LINE_CHARS]
            if used + len(line) + 1 > chars:
                break
            taken.append(i)
            used += len(line) + 1
        header = (
            f"[tool output, the {len(taken)} of {len(lines)} lines naming what later steps use; "
            f"{len(text)} chars, {token_count} tokens; "
            f"full output: GET {message_path(session_id, seq)}]"
        )
        return "\n".join([header, *(lines[i][:LINE_CHARS] for i in sorted(taken))])

    ratio = len(text) / max(token_count, 1)
    fitted = _fit(base, build, int(limit * ratio), limit, counter)
    if fitted is not None and fitted[1] >= token_count:
        # The lines are the whole output, or about as long: sent as logged.
        result = (base, token_count if base == dict(body) else counter.count_message(base))
    elif fitted is None:
        bare = {**base, "content": build(0)}
        result = (bare, counter.count_message(bare))
    else:
        result = fitted
    cache.put(key, result)
    return dict(result[0]), result[1]


def cut_text(
    body: Mapping[str, Any],
    *,
    seq: int,
    session_id: str,
    target: int,
    token_count: int,
    counter: TokenCounter,
    cache: PreviewCache,
    strip_tool_calls: bool = False,
) -> tuple[dict[str, Any], int]:
    """The head of a long text and its key lines, with the path of the full message; its count."""
    text = content_text(body)
    base = sanitize(body, strip_tool_calls=strip_tool_calls)
    path = message_path(session_id, seq)
    if base.get("tool_calls"):
        base["tool_calls"] = [_cut_call(c, path) for c in base["tool_calls"]]
    ratio = len(text) / max(token_count, 1)
    # The cut reads the text only up to the largest head plus the key-line scan.
    span = int(target * ratio) + 1 + _KEY_SCAN_CHARS
    rest = repr({k: v for k, v in base.items() if k != "content"})
    key = ("cut", counter.name, session_id, seq, target, token_count, len(text), text[:span], rest)
    hit = cache.get(key)
    if hit is not None:
        return dict(hit[0]), hit[1]
    note = f"[cut: {len(text)} chars; full message: GET {path}]"
    base["content"] = note
    base_tokens = counter.count_message(base)
    room = target - base_tokens

    head_chars_max = max(int(room * ratio), 0)
    key_lines = _key_lines(text[head_chars_max:], head_chars_max)

    def build(chars: int) -> str:
        # Key lines get up to 2/5 of the room; the head takes whatever they leave.
        keys: list[str] = []
        left = chars * 2 // 5
        for line in key_lines:
            if left <= 0:
                break
            keys.append(line[: min(left, 240)])
            left -= len(keys[-1]) + 1
        used = sum(len(k) + 1 for k in keys)
        return "\n".join([text[: chars - used], *keys, note])

    fitted = _fit(base, build, int((room - 8) * ratio * 0.95), target, counter)
    result = fitted if fitted is not None else (base, base_tokens)
    cache.put(key, result)
    return dict(result[0]), result[1]


def _cut_call(call: Any, path: str) -> Any:
    """`call` with its long argument values cut to their heads, sharing `CALL_VALUE_CHARS`:
    one long value keeps that many characters, the two sides of an edit half each (never
    less than a quarter).

    Arguments stay a JSON object with the same keys (the Anthropic and Responses
    formats parse them); arguments that are not one are left as they are.
    """
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        return call
    raw = fn.get("arguments")
    if not isinstance(raw, str) or len(raw) <= CALL_VALUE_CHARS:
        return call
    try:
        args = json.loads(raw)
    except ValueError:
        return call
    if not isinstance(args, dict):
        return call
    share = CALL_VALUE_CHARS // max(1, _long_values(args, CALL_VALUE_CHARS // 2))
    cut = _cut_values(args, path, max(share, CALL_VALUE_CHARS // 4))
    if cut == args:
        return call
    text = json.dumps(cut, ensure_ascii=False)
    return {**call, "function": {**fn, "arguments": text}}


def _long_values(value: Any, over: int) -> int:
    """How many strings and lists in `value` are longer than `over` characters (a list as
    one: its items are cut together)."""
    if isinstance(value, str):
        return int(len(value) > over)
    if isinstance(value, dict):
        return sum(_long_values(v, over) for v in value.values())
    if isinstance(value, list):
        return int(_json_len(value) > over)
    return 0


def _cut_values(value: Any, path: str, chars: int) -> Any:
    """`value` with its strings over `chars` cut to their head and its lists over `chars` to
    their first items (objects keep every key); a cut is made only where it is shorter
    than what it replaces, so a value just over the limit stays whole."""
    if isinstance(value, str):
        if len(value) <= chars:
            return value
        cut = f"{value[:chars]}… [{len(value)} chars; full call: GET {path}]"
        return cut if len(cut) < len(value) else value
    if isinstance(value, dict):
        return {k: _cut_values(v, path, chars) for k, v in value.items()}
    if isinstance(value, list):
        whole = _json_len(value)
        if whole <= chars:
            return value
        # The first items while they fit, at least one (itself cut), then a note.
        kept: list[Any] = []
        used = 0
        for item in value:
            item = _cut_values(item, path, chars)
            used += _json_len(item) + 2
            if kept and used > chars:
                break
            kept.append(item)
        if len(kept) == len(value):
            return kept
        kept.append(f"… [{len(value) - len(kept)} more of {len(value)}; full call: GET {path}]")
        return kept if _json_len(kept) < whole else value
    return value


def _json_len(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False))


def _key_lines(text: str, chars: int) -> list[str]:
    """Key lines of `text`, stripped, up to about `chars` characters in all."""
    text = text[:_KEY_SCAN_CHARS]
    out: list[str] = []
    total = 0
    for start in key_line_starts(text):
        end = text.find("\n", start)
        stripped = text[start : end if end >= 0 else len(text)].strip()
        if stripped:
            out.append(stripped)
            total += min(len(stripped), 240) + 1
            if total >= chars:
                break
    return out
