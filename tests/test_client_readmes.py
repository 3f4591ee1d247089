"""Each client's README names every public method of its client (the Python one
listed neither `search` nor `report_usage`)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from contextd_client import AsyncContextdClient, ContextdClient

ROOT = Path(__file__).resolve().parents[1]


def _public(cls: type) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction) if not n.startswith("_")}


def test_the_python_readme_names_every_method() -> None:
    readme = (ROOT / "clients" / "python" / "README.md").read_text()
    methods = _public(ContextdClient) | _public(AsyncContextdClient)
    assert {"search", "report_usage"} <= methods
    missing = sorted(m for m in methods if f"`{m}(" not in readme)
    assert not missing, f"clients/python/README.md does not name {missing}"


# A method of the class: two spaces in, a name, maybe type parameters, then its arguments.
_TS_METHOD = re.compile(r"^  (?:async )?([a-z]\w*)(?:<[^(]*>)?\(", re.MULTILINE)


def test_the_typescript_readme_names_every_method() -> None:
    source = (ROOT / "clients" / "typescript" / "src" / "client.ts").read_text()
    body = source[source.index("export class ContextdClient") :]
    body = body[: body.index("\n}\n")]
    methods = set(_TS_METHOD.findall(body)) - {"constructor"}
    assert {"search", "reportUsage", "withLease"} <= methods
    readme = (ROOT / "clients" / "typescript" / "README.md").read_text()
    missing = sorted(m for m in methods if f"`{m}(" not in readme)
    assert not missing, f"clients/typescript/README.md does not name {missing}"
