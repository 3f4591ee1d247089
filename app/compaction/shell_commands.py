"""Shell commands as the artifacts section reads them: the files a command reads and
changes, and how a call ended (exit code, last error line), off its output (see
artifacts.py). By rule, on the exact strings: never a paraphrase."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Literal

Kind = Literal["changed", "read", "ran", "got"]

MAX_CHARS = 200

_EXIT = re.compile(
    r"<returncode>\s*(-?\d+)\s*</returncode>|exit(?:ed)?(?: with)?[ _](?:code|status)\W{0,3}(-?\d+)"
    r"|returncode\W{1,3}(-?\d+)|PROCESS-DONE:(-?\d+):",
    re.IGNORECASE,
)
_ERROR_LINE = re.compile(
    r"\b(?:\w*Error|\w*Exception|error|ERROR|FAILED|FAIL|Failed|failed|fatal|Fatal|panic|"
    r"No such file or directory|command not found|Permission denied|Traceback)\b"
)
_OUTCOME_HEAD = 512
_OUTCOME_TAIL = 4096
_ERROR_LINES = 40
_MARKUP = re.compile(r"</?(?:returncode|output)>")

_SHELL_SPLIT = frozenset({"|", "||", "&&", ";", "&", "(", ")", "|&", ";;"})
_REDIRECT_OUT = frozenset({">", ">>", "&>", ">|", "&>>"})
_READERS = frozenset(
    """cat head tail less more nl wc grep egrep fgrep rg ag awk sed diff cmp file stat bat jq
    xxd hexdump strings od sort uniq cut view vim vi nano emacs source tac""".split()
)
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "awk", "sed"})
_CHANGERS = frozenset({"touch", "rm", "tee", "truncate", "patch", "chmod", "unlink", "mkdir"})
_PREFIXES = frozenset({"sudo", "time", "nohup", "env", "command", "builtin", "exec"})
_FILEISH = re.compile(r"^(?:[\w.~@+-]*/)*[\w@+-][\w.@+-]*\.[A-Za-z0-9]{1,8}$|/")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")


def one_line(text: str, limit: int = MAX_CHARS) -> str:
    """The first line of `text`, cut to `limit`; what was cut is said, never rewritten."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0].strip()
    more = f" …(+{len(lines) - 1} lines)" if len(lines) > 1 else ""
    if len(first) + len(more) > limit:
        first = first[: max(limit - len(more) - 1, 20)].rstrip() + "…"
    return first + more


def _shell_lines(command: str) -> Iterator[str]:
    """The command's lines without here-document bodies (content, not operands)."""
    lines = command.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        yield line
        i += 1
        for m in _HEREDOC.finditer(line):
            while i < len(lines) and lines[i].strip() != m.group(2):
                i += 1
            i += 1


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unbalanced quote: words are still better than nothing
        return [w.strip("'\"") for w in line.split()]


def fileish(token: str) -> bool:
    return (
        not token.startswith("-")
        and token not in ("/dev/null", "/dev/stdout", "/dev/stderr")
        and not any(c in token for c in "*?$`=<>{}")
        and len(token) <= 260
        and bool(_FILEISH.search(token))
    )


def shell_files(command: str) -> list[tuple[Kind, str]]:
    """(read|changed, path) for the file operands of a shell command, in order."""
    found: list[tuple[Kind, str]] = []
    for line in _shell_lines(command):
        segment: list[str] = []
        for token in [*_tokens(line), ";"]:
            if token in _SHELL_SPLIT:
                found.extend(_segment_files(segment))
                segment = []
            else:
                segment.append(token)
    return found


def _segment_files(words: list[str]) -> list[tuple[Kind, str]]:
    out: list[tuple[Kind, str]] = []
    operands: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word in _REDIRECT_OUT or word == "<":
            target = words[i + 1] if i + 1 < len(words) else ""
            if fileish(target):
                out.append(("changed" if word != "<" else "read", target))
            skip = True
        elif word.isdigit() and i + 1 < len(words) and words[i + 1] in _REDIRECT_OUT:
            continue  # the `2` of `2>`
        else:
            operands.append(word)
    while operands and (operands[0] in _PREFIXES or re.match(r"^\w+=", operands[0])):
        operands.pop(0)
    if not operands:
        return out
    program = operands[0].rsplit("/", 1)[-1]
    rest = operands[1:]
    flags = [w for w in rest if w.startswith("-")]
    args = [w for w in rest if not w.startswith("-")]
    if program in _PATTERN_FIRST and not ({"-e", "-f"} & set(flags)) and args:
        args = args[1:]  # the pattern or script, not a file
    files = [a for a in args if fileish(a)]
    if program == "sed" and any(f.startswith("-i") or f == "--in-place" for f in flags):
        out.extend(("changed", f) for f in files)
    elif program in ("mv", "cp", "ln", "install", "rsync"):
        if program == "mv":
            out.extend(("changed", f) for f in files)
        elif files:
            out.extend([*(("read", f) for f in files[:-1]), ("changed", files[-1])])
    elif program in _CHANGERS:
        out.extend(("changed", f) for f in files)
    elif program in _READERS:
        out.extend(("read", f) for f in files)
    elif program == "git" and args:
        kind: Kind = "changed" if args[0] in ("checkout", "restore", "rm", "mv") else "read"
        out.extend((kind, f) for f in files if f != args[0])
    return out


def outcome(output: str) -> str:
    """How a call ended, from its output: `exit N`, the last error line, or the one short line.

    Exit codes are printed first (`<returncode>`) or last (`exit code 1`), and the line
    that says what failed is near the end (a traceback's last line, a test summary):
    only the head and the tail of a long output are read.
    """
    if len(output) > _OUTCOME_HEAD + _OUTCOME_TAIL:
        tail = output[-_OUTCOME_TAIL:]
        seen = output[:_OUTCOME_HEAD] + "\n" + tail[tail.find("\n") + 1 :]
    else:
        seen = output
    parts: list[str] = []
    codes = [next(g for g in m.groups() if g is not None) for m in _EXIT.finditer(seen)]
    if codes:
        parts.append(f"exit {codes[-1]}")
    lines = [ln.strip() for ln in _MARKUP.sub("", seen).splitlines() if ln.strip()]
    errors = [ln for ln in lines[-_ERROR_LINES:] if _ERROR_LINE.search(ln)]
    if errors and not (codes and codes[-1] == "0"):
        parts.append(one_line(errors[-1], 160))
    elif not codes and 0 < len(lines) <= 4 and len(lines[0]) <= 120:
        # A short answer is the result itself (`1023.0`, `Wrong flag!`); a long one is
        # read off by the values section, not cut into a line here.
        parts.append(one_line("\n".join(lines), 160))
    return " · ".join(parts)


def failed(ended: str) -> bool:
    """Whether an `outcome` says the call failed: a non-zero exit or an error line."""
    code = re.match(r"exit (-?\d+)", ended)
    if code is not None:
        return code.group(1) != "0"
    return bool(ended) and _ERROR_LINE.search(ended) is not None
