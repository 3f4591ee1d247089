"""The summary's `artifacts` section: the agent's trail, verbatim (SPEC §5).

An agent's next step is built on what it did: the files it read and changed,
the commands it ran and how they ended, the ids and numbers tools gave back.
A summary, written by a model or not, keeps few of those exact strings, so
contextd reads them off the compacted range itself, by rule, and carries them
in a section the model never writes:

- **files read / changed**: string arguments whose key names a path or a file
  (`path`, `file_path`, `filename`, `target_file`, ...), changed when the tool's
  name or its one-word action (`command: "str_replace"`) is a verb that writes
  (edit, write, create, replace, delete, move, ...), read otherwise; and the
  file operands of shell commands (`cat a.py`, `sed -n 1,9p b.py`, `> out.txt`,
  `sed -i`, `mv`, `rm`, `tee`, ...);
- **commands run**: a shell command (the `command`/`cmd`/`script` argument of
  any tool, or the arguments of a tool whose name says shell) or any other
  tool call without file arguments (`get_order(order_id=W123)`), with how it
  ended: the exit code and the last error line of its output, or the output
  itself when it is one short line;
- **values from tools**: identifiers (ids, names, numbers, paths: see
  `signals.extract_identifiers`) that first appear in a tool's output and that
  a later call, a later assistant message or the preserved tail reuses; and those
  that a tool returned before the range (`earlier`: the last tool outputs already
  compacted) and that the range or the tail reuses: a card's last four digits read
  in one range and quoted back to the user in the next would otherwise be in no
  range's trail (the first had no reuse yet, the second no tool output of it).

Items are stored as `kind: text` strings, oldest first, and rolled like the
user's messages: the previous summary's then the new range's, an item seen
again moving to its latest position, and the oldest left out once the section
passes `artifacts_ratio` of the usable budget (newest kept first). Commands
are cut to their first line and `MAX_CHARS`: a prefix of the exact string,
never a paraphrase.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.compaction.provenance import Ranges, cite, ranges_of, split_cites
from app.compaction.reused_values import Uses, earlier_reused_values, reused_values
from app.compaction.shell_commands import MAX_CHARS, Kind, fileish, outcome, shell_files
from app.compaction.shell_commands import one_line as _one_line
from app.core.conversation import LoggedMessage, call_function

if TYPE_CHECKING:  # summary.py renders this section: import the protocol for types only
    from app.core.tokens.counter import TextCounter

KINDS: tuple[Kind, ...] = ("changed", "read", "ran", "got")  # rendering order

# A bullet and the line break around each item in the rendered section.
ITEM_OVERHEAD_TOKENS = 2
# The section's heading and its four group headings.
HEADINGS_TOKENS = 40

_PATH_KEY = re.compile(
    r"(?:^|_)(?:path|paths|file|files|filename|filenames|filepath|filepaths|dir|dirs|"
    r"directory|directories|folder|folders|notebook)$"
)
# Keys that name a path only sometimes (`destination: "SEA"` is an airport): their values
# must look like one.
_MAYBE_PATH_KEY = re.compile(r"(?:^|_)(?:src|dst|source|destination|target|to|from)$")
_COMMAND_KEYS = ("command", "cmd", "commands", "script", "shell_command", "command_line")
_SHELL_TOOL = re.compile(r"bash|shell|terminal|exec|run|command|cmd|console|\bsh\b")
_CHANGE_VERBS = frozenset(
    """write edit create replace insert patch apply delete remove rm move rename mv copy cp
    append update save modify undo overwrite mkdir touch put set""".split()
)
_ACTION_KEYS = ("command", "action", "mode", "operation", "op")
_WORD = re.compile(r"[a-z]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

_FENCED = re.compile(r"```.*?(?:```|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Artifact:
    kind: Kind
    text: str
    cites: Ranges = ()  # the call and its result's seqs (provenance.py)

    def encode(self) -> str:
        return cite(f"{self.kind}: {self.text}", self.cites)

    @property
    def key(self) -> str:
        """What makes two items the same artifact: a command run again ends anew."""
        if self.kind == "ran":
            return "ran: " + self.text.split(" → ", 1)[0]
        if self.kind == "got":  # one value, whichever tool gave it last
            return "got: " + self.text.split(" ← ", 1)[0]
        return f"{self.kind}: {self.text}"


def decode(item: str) -> Artifact | None:
    kind, sep, rest = item.partition(": ")
    text, cites = split_cites(rest)
    if not sep or kind not in KINDS or not text:
        return None
    return Artifact(kind, text, cites)


def _parse_args(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


def _argument_values(raw: str) -> str:
    """The values of a call's arguments, not their keys: `old_str` is a key, not a reuse."""
    stack = [_parse_args(raw)]
    values: list[str] = []
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item is not None:
            values.append(str(item))
    return "\n".join(values)


def _words(name: str) -> set[str]:
    return set(_WORD.findall(_CAMEL.sub("_", name).lower()))


def _path_values(args: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key, value in args.items():
        name = _CAMEL.sub("_", str(key)).lower()
        sure = bool(_PATH_KEY.search(name))
        if not sure and not _MAYBE_PATH_KEY.search(name):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and 0 < len(v.strip()) <= 260 and "\n" not in v:
                if sure or fileish(v.strip()):
                    out.append(v.strip())
    return out


def _action(name: str, args: dict[str, Any]) -> set[str]:
    """The verbs of a call: its one-word action argument's (`command: "view"` of an editor
    named `str_replace_editor`), else its name's."""
    for key in _ACTION_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip() and " " not in value.strip():
            return _words(value)
    return _words(name)


def _command_of(name: str, args: Any) -> str | None:
    """The shell command a call runs, if it runs one."""
    shell_tool = bool(_SHELL_TOOL.search(name.lower()))
    if isinstance(args, str):
        return args if shell_tool and args.strip() else None
    if not isinstance(args, dict):
        return None
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(shlex.quote(v) for v in value)
        if isinstance(value, str) and value.strip():
            # A one-word `command` beside a path is an editor's action (`view`), not a shell's.
            if shell_tool or (" " in value.strip() and not _path_values(args)):
                return value
    return None


def _call_line(name: str, args: Any) -> str:
    if isinstance(args, dict):
        inner = ", ".join(
            f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            for k, v in args.items()
        )
    else:
        inner = str(args)
    return f"{name}({inner})"


def _agent_texts(m: LoggedMessage) -> Iterator[str]:
    """What the user and the agent wrote in a message: prose outside code blocks (an
    output pasted back reuses nothing) and the values of its calls' arguments."""
    if m.role == "tool" or not m.counts_in_context:
        return
    yield _FENCED.sub(" ", m.text)
    for call in m.body.get("tool_calls") or ():
        if isinstance(call, dict):
            yield _argument_values((call_function(call) or ("", ""))[1])


def range_artifacts(
    messages: Sequence[LoggedMessage],
    later: Sequence[LoggedMessage] = (),
    earlier: Sequence[LoggedMessage] = (),
) -> tuple[str, ...]:
    """The artifacts of a compacted range, encoded, oldest first (see the module docstring).

    What the agent writes in `later` (the preserved tail) counts as reuse of a value a
    tool returned; what later tools print does not. `earlier`: messages before the range
    (their tool outputs and the calls that asked for them), whose values count when the
    range or the tail reuses them.
    """
    answers = {
        str(m.body.get("tool_call_id")): m
        for m in messages
        if m.role == "tool" and m.counts_in_context
    }
    names: dict[str, str] = {}
    items: list[Artifact] = []
    uses = Uses([])
    # (offset in the uses where the output was read, its place in `items`, tool name, output,
    # its seq)
    outputs: list[tuple[int, int, str, str, int]] = []
    for m in messages:
        if not m.counts_in_context:
            continue
        if m.role == "tool":
            call_id = str(m.body.get("tool_call_id"))
            outputs.append((uses.size, len(items), names.get(call_id, "tool"), m.text, m.seq))
            continue
        for text in _agent_texts(m):
            uses.add(text)
        for call in m.body.get("tool_calls") or ():
            if not isinstance(call, dict):
                continue
            name, raw = call_function(call) or ("?", "")
            names[str(call.get("id"))] = name
            answer = answers.get(str(call.get("id")))
            seqs = ranges_of((m.seq, answer.seq) if answer else (m.seq,))
            found = call_artifacts(name, raw, answer.text if answer else None)
            items.extend(replace(a, cites=seqs) for a in found)
    files = {a.text for a in items if a.kind in ("read", "changed")}
    tail = "\n".join(t for m in later for t in _agent_texts(m))
    got = reused_values(outputs, uses, tail)
    got += earlier_reused_values(earlier, uses, tail, {g.value for g in got})
    # Each value where its tool answered, so that the newest kept are the newest work.
    at: dict[int, list[Artifact]] = {}
    for g in got:
        if g.value not in files:
            at.setdefault(g.place, []).append(Artifact("got", f"{g.value} ← {g.tool}", g.cites))
    merged: list[Artifact] = []
    for place in range(len(items) + 1):
        merged.extend(at.get(place, ()))
        merged.extend(items[place : place + 1])
    return tuple(a.encode() for a in _ordered(merged))


def call_artifacts(name: str, raw: str, output: str | None) -> list[Artifact]:
    """The files, command and outcome of one tool call."""
    args = _parse_args(raw)
    out: list[Artifact] = []
    command = _command_of(name, args)
    ended = outcome(output) if output is not None else ""
    if command is not None:
        out.extend(Artifact(k, path) for k, path in shell_files(command))
        text = _one_line(command)
        out.append(Artifact("ran", f"{text} → {ended}" if ended else text))
        return out
    paths = _path_values(args) if isinstance(args, dict) else []
    if paths:
        kind: Kind = "changed" if _action(name, args) & _CHANGE_VERBS else "read"
        out.extend(Artifact(kind, p) for p in paths)
        return out
    line = _one_line(_call_line(name, args), MAX_CHARS - 60)
    out.append(Artifact("ran", f"{line} → {ended}" if ended else line))
    return out


def _ordered(items: Iterable[Artifact]) -> list[Artifact]:
    """Items without repeats, each at its latest position."""
    latest: dict[str, Artifact] = {}
    for a in items:
        latest.pop(a.key, None)
        latest[a.key] = a
    return list(latest.values())


def roll_artifacts(
    previous: Sequence[str],
    new: Sequence[str],
    *,
    max_tokens: int,
    counter: TextCounter,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kept, dropped): `previous` then `new`, without repeats, the newest that fit kept."""
    items = _ordered(a for a in map(decode, (*previous, *new)) if a is not None)
    room = max_tokens - HEADINGS_TOKENS
    cut = len(items)
    for i in range(len(items) - 1, -1, -1):
        room -= counter.count_text(cite(items[i].text, items[i].cites)) + ITEM_OVERHEAD_TOKENS
        if room < 0:
            break
        cut = i
    return (
        tuple(a.encode() for a in items[cut:]),
        tuple(a.encode() for a in items[:cut]),
    )


HEADINGS: dict[str, dict[str, str]] = {
    "en": {
        "artifacts": "Artifacts (exact strings, oldest first)",
        "changed": "Files changed",
        "read": "Files read",
        "ran": "Commands and calls (→ how they ended)",
        "got": "Values from tools (← which tool)",
    },
    "zh": {
        "artifacts": "操作记录（原文，按时间先后）",
        "changed": "修改过的文件",
        "read": "读取过的文件",
        "ran": "运行的命令与调用（→ 结果）",
        "got": "工具返回的值（← 来自哪个工具）",
    },
}


def render_artifacts(items: Sequence[str], lang: str) -> list[str]:
    """The section's lines: a heading, then each group's heading and one line per artifact."""
    decoded = [a for a in map(decode, items) if a is not None]
    if not decoded:
        return []
    h = HEADINGS["zh"] if lang == "zh" else HEADINGS["en"]
    colon = "：" if lang == "zh" else ":"
    lines = [f"{h['artifacts']}{colon}"]
    for kind in KINDS:
        group = [cite(a.text, a.cites) for a in decoded if a.kind == kind]
        if group:
            lines.append(f"{h[kind]}{colon}")
            lines.extend("- " + text for text in group)
    return lines
