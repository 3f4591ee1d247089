"""The strategy interface and the registry of strategies by name.

A strategy only chooses which history units to send and in which form; the
assembly pipeline around it builds the system block, tools, dynamic context
and summary, renders the chosen units in log order, checks the invariants of
SPEC §3 (it adds any pinned unit or latest user message a strategy forgot)
and does the final accounting. So a strategy cannot break a tool group, the
log order or the budget arithmetic: it returns unit indexes, not messages.

Writing one (see README.md next to this file)::

    class NewestOnly(Strategy):
        name = "newest_only"

        def select(self, view: HistoryView, budget: int) -> Selection:
            sel = Selection()
            left = budget - sel.take_mandatory(view, budget)
            for unit in reversed(view.units):
                if unit.index not in sel.picks and unit.cost(Form.FULL) <= left:
                    sel.pick(unit, Form.FULL, "newest")
                    left -= unit.cost(Form.FULL)
            return sel

and register it in your package's pyproject::

    [project.entry-points."contextd.strategies"]
    newest_only = "my_package.strategies:NewestOnly"
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from app.context.view import Form, HistoryView, Unit

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "contextd.strategies"


@dataclass(slots=True)
class Selection:
    """Chosen units: `picks[unit.index] = (form, rule)`; `rules` explains units left out."""

    picks: dict[int, tuple[Form, str]] = field(default_factory=dict)
    rules: dict[int, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def pick(self, unit: Unit, form: Form, rule: str) -> None:
        self.picks[unit.index] = (form, rule)

    def cost(self, view: HistoryView) -> int:
        return sum(view.units[i].cost(form) for i, (form, _) in self.picks.items())

    def take_mandatory(self, view: HistoryView, budget: int, extra: Iterable[Unit] = ()) -> int:
        """Picks the hard units (and `extra`), compacting them if they do not fit; returns cost."""
        units = {u.index: u for u in (*view.hard(), *extra)}
        for u in units.values():
            self.pick(u, Form.FULL, hard_rule(u))
        return fit_by_compacting(self, view, list(units.values()), budget)


def hard_rule(unit: Unit) -> str:
    return "pinned" if unit.pinned else "latest_user" if unit.latest_user else "latest"


def fit_by_compacting(sel: Selection, view: HistoryView, units: list[Unit], budget: int) -> int:
    """Turns picked `units` to COMPACT, oldest first and the latest user message last,
    until the selection fits `budget`; returns the selection's cost."""
    total = sel.cost(view)
    order = sorted(units, key=lambda u: (u.latest_user, u.index))
    for u in order:
        if total <= budget:
            break
        form, rule = sel.picks[u.index]
        if form is Form.FULL and not u.pinned:
            total += u.cost(Form.COMPACT) - u.cost(Form.FULL)
            sel.picks[u.index] = (Form.COMPACT, rule)
    return total


class Strategy(ABC):
    """Chooses history units within a token budget.

    `budget` is what is left for history after the system block, tools, dynamic
    context and summary; it may be negative when those alone do not fit.
    `summary_required`: the pipeline keeps the compacted summary even when
    mandatory history then goes over budget (otherwise the summary yields first).
    """

    # Set in each class body (the registry reads the name off the class); plain attributes,
    # not ClassVars, so that a wrapper (app/context/stability.py) can carry its inner's.
    name: str
    summary_required: bool = False
    # A FIFO strategy's history is always the newest contiguous run plus the hard units:
    # a trim never keeps an older prefix of the previous payload for the cache's sake.
    fifo: bool = False
    # Offered the compacted units just below the watermark (`Unit.compacted`) to send as
    # recent context where the budget leaves room (app/context/backfill.py). A strategy
    # that says so must never make one mandatory; the others never see them.
    backfill: bool = False

    @abstractmethod
    def select(self, view: HistoryView, budget: int) -> Selection: ...

    def trim(self, view: HistoryView, target: int, budget: int) -> Selection:
        """A trim's selection (app/context/stability.py): cut to the low-water mark
        `target` so the following calls have room to append; `budget` is the room there
        is. By default the strategy's own selection within `target`."""
        return self.select(view, target)


_BUILTIN: dict[str, type[Strategy]] = {}
_plugins: dict[str, type[Strategy]] | None = None
_plugins_lock = threading.Lock()


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator for the built-in strategies."""
    _BUILTIN[cls.name] = cls
    return cls


def _load_plugins() -> dict[str, type[Strategy]]:
    global _plugins
    with _plugins_lock:
        if _plugins is not None:
            return _plugins
        found: dict[str, type[Strategy]] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name in _BUILTIN:
                log.warning("strategy plugin %s ignored: the name is built in", ep.value)
                continue
            try:
                cls = ep.load()
            except Exception:  # a broken plugin must not take the service down
                log.warning(
                    "strategy plugin %s=%s failed to load", ep.name, ep.value, exc_info=True
                )
                continue
            if not (isinstance(cls, type) and issubclass(cls, Strategy)):
                log.warning("strategy plugin %s=%s is not a Strategy subclass", ep.name, ep.value)
                continue
            found[ep.name] = cls
        _plugins = found
        return found


def available_strategies() -> list[str]:
    return sorted({*_BUILTIN, *_load_plugins()})


def get_strategy(name: str) -> Strategy:
    """A fresh instance of the named strategy; KeyError if no such strategy."""
    builtin = _BUILTIN.get(name)
    if builtin is not None:
        return builtin()
    cls = _load_plugins().get(name)
    if cls is None:
        raise KeyError(name)
    try:
        return cls()
    except Exception as exc:
        log.warning("strategy plugin %s cannot be instantiated", name, exc_info=True)
        raise KeyError(name) from exc


class NoSelection(Exception):
    """A strategy declines to select (a replay-only wrapper whose layout no longer fits:
    app/context/summary_switch.py); the caller makes the payload another way. Never
    taken for a third-party strategy's bug."""


def is_builtin(strategy: Strategy) -> bool:
    return _BUILTIN.get(strategy.name) is type(strategy)


def reset_plugins() -> None:
    """Forget loaded plugins (tests install fake entry points)."""
    global _plugins
    with _plugins_lock:
        _plugins = None
