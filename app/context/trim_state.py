"""A payload stream's layout: what its last trim kept (app/context/stability.py).

Pure data: the units kept (their seqs, the form each was sent in, the rule that
kept it) and why the others were left out, for one session generation and
watermark, up to `through_seq`; its `id` names it in `prefix_id`s.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only read: its generation, watermark and last seq
    from app.db.models import SessionRow

# Units as a layout stores them: the seqs of the unit's messages, its form, its rule.
UnitKey = tuple[tuple[int, ...], int]


def digest(value: Any, size: int = 12) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def params_key(**params: Any) -> str:
    """The stream a call belongs to: a digest of the parameters that shape its selection."""
    return digest(params, 32)


@dataclass(frozen=True, slots=True)
class Layout:
    """What a stream's last trim kept; `through_seq` = watermark and no units: untrimmed."""

    generation: int
    watermark: int
    through_seq: int
    kept: tuple[tuple[tuple[int, ...], int, str], ...] = ()
    # Why the units the trim left out were left out (first seq, rule), for `decisions`.
    dropped: tuple[tuple[int, str], ...] = ()
    # Per tool output a LINES unit kept was cut for: (seq, the identifiers its lines hold),
    # as the trim found them. A replay cuts to these, never to what it finds again: its
    # view is a window that moves with the log (app/context/references.py).
    lines: tuple[tuple[int, tuple[str, ...]], ...] = ()

    @property
    def id(self) -> str:
        return digest([self.generation, self.watermark, self.through_seq, self.entries()])

    def entries(self) -> list[list[Any]]:
        """The JSON of `kept` and `dropped`: [[seqs], form, rule], form -1 for dropped; a
        kept unit with cut outputs adds [[seq, [identifiers]], ...]."""
        names = dict(self.lines)
        out: list[list[Any]] = []
        for seqs, form, rule in self.kept:
            cut = [[s, list(names[s])] for s in seqs if s in names]
            out.append([list(seqs), form, rule, cut] if cut else [list(seqs), form, rule])
        out += [[[seq], -1, rule] for seq, rule in self.dropped]
        return out

    def holds_for(self, session: SessionRow) -> bool:
        return (
            self.generation == session.generation
            and self.watermark == session.last_compaction_seq
            and self.through_seq <= session.last_seq
        )

    def kept_seqs(self) -> set[int]:
        return {s for seqs, _, _ in self.kept for s in seqs}

    @classmethod
    def untrimmed(cls, session: SessionRow) -> Layout:
        return cls(session.generation, session.last_compaction_seq, session.last_compaction_seq)

    @classmethod
    def of_json(cls, generation: int, watermark: int, through: int, entries: Any) -> Layout:
        kept = tuple(
            (tuple(int(s) for s in k[0]), int(k[1]), str(k[2])) for k in entries if k[1] >= 0
        )
        dropped = tuple((int(k[0][0]), str(k[2])) for k in entries if k[1] < 0)
        lines = tuple(
            (int(c[0]), tuple(str(v) for v in c[1]))
            for k in entries
            if k[1] >= 0 and len(k) > 3
            for c in k[3]
        )
        return cls(generation, watermark, through, kept, dropped, lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "watermark": self.watermark,
            "through_seq": self.through_seq,
            "kept": self.entries(),
        }
