"""What contextd knows about model names: their tokenizer and their context window.

Names are matched by prefix on a word boundary (`gpt-4` matches `gpt-4-0613`
and `gpt-4.1`, never `gpt-4o`), the longest matching prefix wins, and a
provider path (`openai/gpt-4o`, `meta-llama/llama-3.1-8b`) or a fine-tune
marker (`ft:gpt-4o-mini:org::id`) is looked through.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Final, Literal, TypeVar

import tiktoken.model

TokenizerName = Literal["o200k_base", "cl100k_base", "estimate"]

# contextd's default model is gpt-4o, so a session without a model counts with its tokenizer.
DEFAULT_TOKENIZER: Final[TokenizerName] = "o200k_base"

_O200K: Final = "o200k_base"
_CL100K: Final = "cl100k_base"

_TOKENIZER_PREFIXES: Final[Mapping[str, TokenizerName]] = {
    "gpt-4o": _O200K,
    "chatgpt-4o": _O200K,
    "gpt-4.1": _O200K,
    "gpt-4.5": _O200K,
    "gpt-5": _O200K,
    "o1": _O200K,
    "o3": _O200K,
    "o4": _O200K,
    "codex-mini": _O200K,
    # tiktoken names o200k_harmony here: the same ranks plus chat-format special
    # tokens that never occur in counted text, so o200k_base counts alike.
    "gpt-oss": _O200K,
    "gpt-4": _CL100K,
    "gpt-3.5": _CL100K,
    "gpt-35": _CL100K,
    "text-embedding-3": _CL100K,
    "text-embedding-ada-002": _CL100K,
}

_CONTEXT_LIMITS: Final[Mapping[str, int]] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4-vision": 128_000,
    "gpt-3.5-turbo": 16_385,
    # The 2023 snapshots and the instruct model kept the original 4k window.
    "gpt-3.5-turbo-0301": 4_096,
    "gpt-3.5-turbo-0613": 4_096,
    "gpt-3.5-turbo-instruct": 4_096,
    "gpt-35-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-oss": 131_072,
    "claude-2": 100_000,
    "claude-2.1": 200_000,
    "claude-instant": 100_000,
    "claude-3": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "llama-3": 8_192,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "mistral-large": 131_072,
}

_V = TypeVar("_V")


def _normalize(model: str) -> str:
    name = model.strip().lower().removeprefix("ft:")
    return name.rsplit("/", 1)[-1]


def _longest_prefix(table: Mapping[str, _V], name: str) -> _V | None:
    best: str | None = None
    for prefix in table:
        if not name.startswith(prefix):
            continue
        # Require a word boundary so that `gpt-4` never claims `gpt-4o` or `o1` claims `o10`.
        boundary = len(name) == len(prefix) or not name[len(prefix)].isalnum()
        if boundary and (best is None or len(prefix) > len(best)):
            best = prefix
    return None if best is None else table[best]


# Both are pure functions of a model name over fixed tables, asked on every append
# (a scan of every prefix each time); the names in use are few.
@functools.lru_cache(maxsize=4096)
def tokenizer_for_model(model: str | None) -> TokenizerName:
    """The tokenizer whose counts stand for `model`: an exact encoding, or "estimate".

    None (or a blank name) means contextd's default model, gpt-4o. Models that are
    not OpenAI's (claude-*, llama-*, …) have no public tokenizer here: "estimate".
    """
    if model is None or not model.strip():
        return DEFAULT_TOKENIZER
    name = _normalize(model)
    found = _longest_prefix(_TOKENIZER_PREFIXES, name)
    if found is not None:
        return found
    try:
        # A pure table lookup in tiktoken (never a download); it knows older OpenAI names.
        encoding = tiktoken.model.encoding_name_for_model(name)
    except KeyError:
        return "estimate"
    if encoding == _O200K:
        return _O200K
    if encoding == _CL100K:
        return _CL100K
    # r50k/p50k models are retired and their rank files are not bundled.
    return "estimate"


@functools.lru_cache(maxsize=4096)
def known_context_limit(model: str | None) -> int | None:
    """The model's context window in tokens, or None when contextd does not know it.

    None for no model at all: the configured `COMPACTION_CONTEXT_LIMIT` applies then.
    """
    if model is None or not model.strip():
        return None
    return _longest_prefix(_CONTEXT_LIMITS, _normalize(model))
