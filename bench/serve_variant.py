"""`contextd serve` with the append's search index switched per variant, for A/B benches.

    CONTEXTD_BENCH_SEARCH=B python -m bench.serve_variant serve --port 8080

Variants (bench/search_append.py):

- A: as shipped: lexemes made, stored in `messages.search` (the GIN index is the
  bench's to create or drop);
- B: no lexemes made, the column left NULL;
- L: as A (the bench drops the GIN index: lexemes stored, not indexed);
- G, C, F, P: as A (the bench sets the GIN index's storage parameters);
- T: lexemes made in Python, nothing stored.

The switch is applied when this module is imported, so it holds in the children of
`serve --workers N` too (they import the parent's main module again).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

# CPU seconds this process spent making vectors (time.process_time), when timed.
VECTOR_CPU = [0.0]


def switch_search(variant: str, timed: bool = False) -> None:
    """Make this process's appends build (or not) their search vector as `variant` says;
    `timed` adds the CPU each vector takes to VECTOR_CPU."""
    import app.messages.write as write

    # The name the append's write calls for a message's vector (an older checkout's
    # too, for an A/B of two checkouts).
    name = "message_vector" if hasattr(write, "message_vector") else "message_tsvector"
    original: Callable[..., Any] = getattr(write, "_bench_original", None) or getattr(write, name)
    write._bench_original = original  # type: ignore[attr-defined]
    if variant in ("A", "L", "F", "P", "G", "C"):
        made = original
    elif variant == "B":
        made = _nothing
    elif variant == "T":
        made = _made_not_stored(original)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    setattr(write, name, _timed(made) if timed and made is not _nothing else made)


def _timed(make: Callable[..., Any]) -> Callable[..., Any]:
    def made(body: Any, key: str) -> Any:
        start = time.process_time()
        try:
            return make(body, key)
        finally:
            VECTOR_CPU[0] += time.process_time() - start

    return made


def _nothing(body: Any, key: str) -> None:
    return None


def _made_not_stored(original: Callable[..., Any]) -> Callable[..., None]:
    def made(body: Any, key: str) -> None:
        original(body, key)

    return made


switch_search(os.environ.get("CONTEXTD_BENCH_SEARCH", "A"))

if __name__ == "__main__":
    from app.cli import main

    sys.exit(main())
