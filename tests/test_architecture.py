"""The shape of app/: small files, and packages that never import each other both ways.

The layers themselves (entry points above the HTTP edge, above the domains, above
infrastructure; a pure engine without database or HTTP code) are import-linter
contracts in pyproject.toml, run by `make test` as `lint-imports`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

APP = Path(__file__).resolve().parents[1] / "app"
MAX_LINES = 400


def test_no_file_in_app_is_over_400_lines() -> None:
    long = {
        str(path.relative_to(APP)): n
        for path in APP.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_two_parts_of_app_import_each_other() -> None:
    """Parts are app's packages and top-level modules; TYPE_CHECKING imports aside."""
    graph = grimp.build_graph("app", exclude_type_checking_imports=True)
    edges: set[tuple[str, str]] = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = _package(module), _package(imported)
            if a != b and b.startswith("app."):
                edges.add((a, b))
    both_ways = sorted((a, b) for a, b in edges if (b, a) in edges and a < b)
    assert both_ways == []


def test_a_cycle_between_two_packages_would_be_found() -> None:
    # The check above reads real imports: app.api imports app.messages.
    graph = grimp.build_graph("app", exclude_type_checking_imports=True)
    assert graph.chain_exists(importer="app.api", imported="app.messages", as_packages=True)


def test_names_are_imported_from_the_module_that_defines_them() -> None:
    """`from x import name as name` is how a module re-exports a name (mypy --strict allows
    no other way): importers would then have two places to import it from."""
    reexporting = set()
    for path in APP.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.asname == a.name for a in node.names):
                reexporting.add(str(path.relative_to(APP)))
    assert reexporting == set()
