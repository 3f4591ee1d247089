"""Schemathesis against a real `contextd serve`, from the service's own OpenAPI schema (SPEC §6, §8).

Every operation, with a valid key and with a wrong one: no 500, and no status
code, content type or body that the schema does not declare. The CI run is
short (`CONTEXTD_FUZZ_EXAMPLES`, default 20 per operation); `make fuzz` runs
long. The schemathesis CLI drives the run: its pytest plugin does not load
under pytest 9.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.processes import Server

KEY = "fuzz-key-0123456789abcdef"
EXAMPLES = os.environ.get("CONTEXTD_FUZZ_EXAMPLES", "20")
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


@pytest.fixture(scope="module")
def fuzz_server(make_database: Callable[[], str]) -> Iterator[Server]:
    server = Server(make_database(), {"CONTEXTD_API_KEYS": f"{KEY}:fuzz"})
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def _schemathesis(server: Server, key: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    st = shutil.which("st", path=str(Path(sys.executable).parent)) or "st"
    return subprocess.run(
        [
            st, "run", f"{server.base_url}/openapi.json",
            "--header", f"Authorization: Bearer {key}",
            "--checks", CHECKS,
            "--max-examples", EXAMPLES,
            "--seed", "1",
            "--workers", "1",  # two threads trip a CPython 3.11 AST race inside schemathesis
            "--request-timeout", "30",
            "--suppress-health-check", "all",
            "--report-dir", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_HOOKS": ""},
    )  # fmt: skip


def test_with_a_key_no_operation_misbehaves(fuzz_server: Server, tmp_path: Path) -> None:
    # The schema itself is behind the key, like every endpoint but the probes.
    assert httpx.get(fuzz_server.base_url + "/openapi.json").status_code == 401
    done = _schemathesis(fuzz_server, KEY, tmp_path)
    report = done.stdout[-6000:] + done.stderr[-2000:]
    # What the server did fails the test: any finding of a check. A crash inside
    # schemathesis itself (seen: CPython 3.11 "AST constructor recursion depth
    # mismatch") is not a finding about the server and only cuts the run short.
    assert "Failures:" not in done.stdout, report
    assert done.returncode == 0 or "Runtime Error" in done.stdout, report
    assert "error" not in _levels(fuzz_server), fuzz_server.log_text()[-4000:]


def test_with_a_wrong_key_nothing_but_401(fuzz_server: Server, tmp_path: Path) -> None:
    # Schemathesis needs the schema, so it is fetched with the key; every call then carries a wrong one.
    spec = httpx.get(
        fuzz_server.base_url + "/openapi.json", headers={"Authorization": f"Bearer {KEY}"}
    ).json()
    statuses = set()
    for path, ops in spec["paths"].items():
        for method in ops:
            url = fuzz_server.base_url + path.replace("{session_id}", "s").replace("{seq}", "1")
            r = httpx.request(method, url, headers={"Authorization": "Bearer wrong"}, json={})
            statuses.add(r.status_code if path not in ("/healthz", "/readyz") else 401)
            assert r.headers["content-type"].startswith(
                ("application/problem+json", "application/json")
            )
    assert statuses == {401}


def _levels(server: Server) -> set[str]:
    import json

    out = set()
    for line in server.log_text().splitlines():
        if line.startswith("{"):
            out.add(str(json.loads(line).get("level")))
    return out
