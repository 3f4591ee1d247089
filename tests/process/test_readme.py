"""README.md's promises, run as a newcomer runs them: every curl command of the tour
and the Python client's ten lines against a real server, twice, and every figure
the README prints is what they printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.processes import REPO, Server

README = (REPO / "README.md").read_text()
_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
_FIGURE = re.compile(r'"(\w+)": (-?\d+(?:\.\d+)?|"[^"]*"|true|false|null)')


def _blocks(kind: str) -> list[str]:
    return [body for lang, body in _BLOCK.findall(README) if lang == kind]


def _run_curls(block: str, base_url: str, sid: str) -> list[tuple[int, str]]:
    script = block.replace("localhost:8080", base_url.removeprefix("http://"))
    script = script.replace("/sessions/demo/", f"/sessions/{sid}/")
    # Each answer followed by its status on a line of its own.
    script = script.replace("curl -s ", "curl -s -w '\\n%{http_code}\\n' ")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    answers = []
    body: list[str] = []
    for line in lines:
        if re.fullmatch(r"\d{3}", line):
            answers.append((int(line), "\n".join(body)))
            body = []
        else:
            body.append(line)
    return answers


def _flat(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _flat(v)
    elif isinstance(value, list):
        for v in value:
            yield from _flat(v)


def test_the_curl_tour_works_twice_and_prints_what_the_readme_says(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    sid = f"tour-{uuid.uuid4().hex[:8]}"
    tour = [b for b in _blocks("sh") if "curl" in b]
    assert len(tour) >= 3
    runs = []
    for _ in range(2):
        answers = [a for block in tour for a in _run_curls(block, server.base_url, sid)]
        assert all(status < 400 for status, _ in answers), answers
        runs.append(answers)
    first, second = runs
    assert first[0][0] == 201 and second[0][0] == 200  # the append, then its replay
    # Everything after the append answers the same the second time.
    assert [b for _, b in first] == [b for _, b in second]

    printed = dict(kv for _, body in first for kv in _flat(json.loads(body)))
    shown = _blocks("json")
    assert shown
    # The first answer is printed whole.
    assert json.loads(shown[0]) == json.loads(first[0][1])
    seen = {(k, json.dumps(v)) for _, body in first for k, v in _flat(json.loads(body))}
    for block in shown:
        for key, value in _FIGURE.findall(block):
            assert (key, value) in seen or key in ("role", "content", "id", "tool_call_id"), (
                key,
                value,
                printed.get(key),
            )


def test_the_python_client_prints_what_the_readme_says(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    blocks = list(_BLOCK.finditer(README))
    [at] = [i for i, m in enumerate(blocks) if m[1] == "python" and "ContextdClient(" in m[2]]
    code, expected = blocks[at][2], blocks[at + 1][2]  # the code, then what it prints
    sid = f"py-{uuid.uuid4().hex[:8]}"
    code = code.replace("http://127.0.0.1:8080", server.base_url).replace('"py-demo"', f'"{sid}"')
    code = code.replace('"py-u1"', f'"{sid}-u1"')
    env = {**os.environ, "PYTHONPATH": str(REPO / "clients" / "python")}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected
    assert len(code.strip().splitlines()) <= 10
