"""`extract_identifiers` as it was before needles: every pattern over the whole text and
the pairwise containment test. The reference the tests hold the shipped function to."""

from __future__ import annotations

from app.compaction import signals


def whole_text_identifiers(text: str, *, gated: bool = False) -> list[str]:
    """With `gated`, a pattern runs only where its substring gate lets it (as before
    needles); without, every pattern runs over every text."""
    found: dict[str, int] = {}
    for kind in signals._KINDS:
        if gated and not kind.present(text):
            continue
        for m in kind.pattern.finditer(text):
            value = (m.group(1) if m.groups() else m.group(0)).strip().rstrip(".,;:")
            if len(value) >= 2 and value not in found and signals._WORDISH.search(value):
                found[value] = m.start()
    values = sorted(found, key=lambda v: found[v])
    return [v for v in values if not any(v != o and v in o for o in values)]
