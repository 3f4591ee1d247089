"""Mid-run user instructions, written by us, planted into real sessions.

A user steering an agent types short instructions in the middle of a run:
"from here on, dates as ISO 8601", "my laptop runs Windows". Whether contextd
keeps them must not depend on the user happening to say "must" or "必须", so
every phrasing here shares no word with the constraint/decision/preference/todo
word lists of the signal detectors (`tests/test_support_planted.py` checks it),
and each carries a `marker`: a distinctive verbatim substring (not in the
dataset) by which its visibility in a payload or summary is checked.

Languages: English, Chinese, Spanish and German, six instructions each.

    messages, planted = plant(session["messages"], k=5, at=(0.2, 0.4, 0.6, 0.8))

puts instructions at step boundaries (never inside a tool group: after a
complete group or answer, before the next assistant or user message) and
returns the new message list with where each instruction went.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.conversation import content_text

LANGS = ("en", "zh", "es", "de")


@dataclass(frozen=True, slots=True)
class Instruction:
    key: str
    lang: str
    text: str
    marker: str  # a verbatim substring of `text`, distinctive enough to search for

    def message(self) -> dict[str, Any]:
        return {"role": "user", "content": self.text}

    def visible_in(self, messages: Iterable[Mapping[str, Any]]) -> bool:
        """True when some message's text holds the marker (case, width, spaces ignored)."""
        needle = normalise(self.marker)
        return any(needle in normalise(content_text(m)) for m in messages)


def _i(key: str, text: str, marker: str) -> Instruction:
    assert marker in text, key
    return Instruction(key, key.split("-", 1)[0], text, marker)


INSTRUCTIONS: tuple[Instruction, ...] = (
    _i(
        "en-dates",
        "For everything from here onward: write dates as ISO 8601, for example 2031-07-04.",
        "ISO 8601, for example 2031-07-04",
    ),
    _i(
        "en-windows",
        "Note for this whole session: my laptop runs Windows 11, so give PowerShell commands.",
        "my laptop runs Windows 11",
    ),
    _i(
        "en-names",
        "Keep in mind until this job ends: variable names in snake_case, 40 characters max.",
        "snake_case, 40 characters max",
    ),
    _i(
        "en-euros",
        "From this point forward, every price in euros, rounded at two decimals.",
        "every price in euros, rounded at two decimals",
    ),
    _i(
        "en-spelling",
        "Every reply after this one: British spelling (colour, organise, centre).",
        "British spelling (colour, organise, centre)",
    ),
    _i(
        "en-clock",
        "Keep in mind for all remaining work: my clock runs at Tokyo time, UTC+09:00.",
        "my clock runs at Tokyo time, UTC+09:00",
    ),
    _i("zh-units", "往后所有回答都用公制单位，比如公里和摄氏度。", "公制单位，比如公里和摄氏度"),
    _i(
        "zh-mac",
        "请注意，本次会话中我的电脑是苹果笔记本，命令请按 macOS 写。",
        "我的电脑是苹果笔记本",
    ),
    _i("zh-money", "从现在起，金额一律以人民币显示，保留两位小数。", "金额一律以人民币显示"),
    _i("zh-comments", "接下来的所有代码注释请写成中文。", "代码注释请写成中文"),
    _i("zh-clock", "提醒一下：整个任务期间，时间一律按北京时间（UTC+8）写。", "时间一律按北京时间"),
    _i(
        "zh-user",
        "顺便说一句，日志里的用户名统一写成 zhang_wei_07。",
        "用户名统一写成 zhang_wei_07",
    ),
    _i(
        "es-dates",
        "Para lo que sigue: fechas en formato día-mes-año, por ejemplo 04-07-2031.",
        "fechas en formato día-mes-año",
    ),
    _i(
        "es-linux",
        "Nota para toda la sesión: trabajo con Linux Mint, así que comandos de bash.",
        "trabajo con Linux Mint",
    ),
    _i(
        "es-mexico",
        "A partir de ahora, responde en español de México, por favor.",
        "responde en español de México",
    ),
    _i(
        "es-branches",
        "Ten en cuenta hasta el final: los nombres de ramas empiezan por feat-.",
        "nombres de ramas empiezan por feat-",
    ),
    _i(
        "es-pesos",
        "Otra cosa para el resto de la tarea: cantidades en pesos chilenos, sin decimales.",
        "cantidades en pesos chilenos, sin decimales",
    ),
    _i(
        "es-tables",
        "De aquí en adelante, las tablas van en formato Markdown con encabezado.",
        "las tablas van en formato Markdown con encabezado",
    ),
    _i(
        "de-comma",
        "Für alles Weitere: Zahlen bitte mit Dezimalkomma, also 3,14 statt 3.14.",
        "Zahlen bitte mit Dezimalkomma",
    ),
    _i(
        "de-debian",
        "Hinweis für die ganze Sitzung: mein Rechner läuft unter Debian 12.",
        "mein Rechner läuft unter Debian 12",
    ),
    _i(
        "de-german",
        "Ab jetzt bitte alle Antworten auf Deutsch, gerne kurz.",
        "alle Antworten auf Deutsch, gerne kurz",
    ),
    _i(
        "de-kelvin",
        "Bis zum Schluss gilt: Temperaturen in Kelvin angeben.",
        "Temperaturen in Kelvin angeben",
    ),
    _i(
        "de-lines",
        "Noch etwas für den Rest der Aufgabe: Zeilenlänge höchstens 88 Zeichen.",
        "Zeilenlänge höchstens 88 Zeichen",
    ),
    _i(
        "de-commits",
        "Von hier an: Commit-Nachrichten im Imperativ, auf Englisch.",
        "Commit-Nachrichten im Imperativ",
    ),
)


def by_lang(lang: str) -> list[Instruction]:
    return [i for i in INSTRUCTIONS if i.lang == lang]


@dataclass(frozen=True, slots=True)
class Planted:
    index: int  # position of the planted user message in the returned list
    instruction: Instruction


def normalise(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def step_boundaries(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Positions `i` where a user message inserted before `messages[i]` comes mid-run:
    after the first user message and some answer or tool result to it, before the
    last message, and splitting no tool group."""
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None:
        return []
    out: list[int] = []
    waiting: set[str] = set()
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            waiting.discard(str(m.get("tool_call_id")))
            continue
        if i > first_user and not waiting and messages[i - 1].get("role") != "user":
            out.append(i)
        waiting = {str(c.get("id")) for c in m.get("tool_calls") or () if isinstance(c, dict)}
    return out


def choose(k: int, langs: Sequence[str] = LANGS, offset: int = 0) -> list[Instruction]:
    """`k` instructions, languages in turn, each language's list rotated by `offset`."""
    out = []
    for j in range(k):
        pool = by_lang(langs[j % len(langs)])
        out.append(pool[(offset + j // len(langs)) % len(pool)])
    return out


def plant(
    messages: Sequence[Mapping[str, Any]],
    k: int,
    *,
    at: Sequence[float] | None = None,
    langs: Sequence[str] = LANGS,
    offset: int = 0,
    until: int | None = None,
) -> tuple[list[dict[str, Any]], list[Planted]]:
    """`messages` with `k` instructions planted at step boundaries.

    `at`: where, as fractions of the run (default: evenly spread, k/(k+1) at
    most); each goes to the first free boundary at or after its point.
    `until`: only boundaries before this position (e.g. the last original user
    message, so that no planted instruction becomes the latest one). Fewer
    than `k` are planted when there are fewer boundaries.
    """
    spots = at if at is not None else [(j + 1) / (k + 1) for j in range(k)]
    bounds = [b for b in step_boundaries(messages) if until is None or b < until]
    chosen: list[int] = []
    for frac in sorted(spots)[:k]:
        target = frac * len(messages)
        free = [b for b in bounds if b not in chosen]
        if not free:
            break
        chosen.append(next((b for b in free if b >= target), free[-1]))
    chosen.sort()
    instructions = choose(len(chosen), langs, offset)
    out: list[dict[str, Any]] = []
    planted: list[Planted] = []
    by_spot = dict(zip(chosen, instructions, strict=True))
    for i, m in enumerate(messages):
        ins = by_spot.get(i)
        if ins is not None:
            planted.append(Planted(len(out), ins))
            out.append(ins.message())
        out.append(dict(m))
    return out, planted
