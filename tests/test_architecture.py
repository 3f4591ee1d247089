"""The shape of app/: small files, packages that never import each other both ways,
no modules in a loop of imports, and files that use only each other's public names.

The layers themselves (entry points above the HTTP edge, above the domains, above
infrastructure; a pure engine without database or HTTP code) are import-linter
contracts in pyproject.toml, run by `make test` as `lint-imports`.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
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
    graph = grimp.build_graph("app", exclude_type_checking_imports=True, cache_dir=None)
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
    graph = grimp.build_graph("app", exclude_type_checking_imports=True, cache_dir=None)
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


def _app_imports(source: str) -> list[str]:
    """The modules of app/ a file imports, at its top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [n for n in names if n == "app" or n.startswith("app.")]
    return found


def test_no_migration_imports_app() -> None:
    """A migration is what the schema was at its revision: with live code in it, what it
    did would change whenever that code does. Work that needs live code (indexing the
    messages stored before search, app/index/unindexed.py) runs after the migrations;
    env.py, which runs them, is not a migration."""
    versions = APP / "db" / "migrations" / "versions"
    importing = {
        path.name: imports
        for path in sorted(versions.glob("*.py"))
        if (imports := _app_imports(path.read_text(encoding="utf-8")))
    }
    assert importing == {}
    assert len(list(versions.glob("*.py"))) > 10  # the folder the migrations are in


def test_an_import_of_app_inside_a_migrations_function_would_be_found() -> None:
    source = "import sqlalchemy as sa\n\ndef upgrade():\n    from app.index import lexemes\n"
    assert _app_imports(source) == ["app.index"]
    assert _app_imports("import app.db.engine, alembic") == ["app.db.engine"]
    assert _app_imports("from application import x\nfrom . import y") == []


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The loops `python docs/floor_plan.py` counts, found by the same code."""
    spec = importlib.util.spec_from_file_location(
        "docs_floor_plan", ROOT / "docs" / "floor_plan.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[list[str]] = module.module_loops(graph)
    return found


def test_no_modules_import_each_other_in_a_loop_even_for_type_checking() -> None:
    """A loop of imports under TYPE_CHECKING is still two modules that cannot be read
    apart; a protocol where the types meet breaks it (app/context/references.py `Unit`)."""
    assert (
        _cycles(grimp.build_graph("app", exclude_type_checking_imports=False, cache_dir=None)) == []
    )


def test_a_loop_of_imports_would_be_found() -> None:
    graph = grimp.ImportGraph()
    for name in ("app.a", "app.b", "app.c"):
        graph.add_module(name)
    graph.add_import(importer="app.a", imported="app.b")
    graph.add_import(importer="app.b", imported="app.a")
    graph.add_import(importer="app.b", imported="app.c")
    assert _cycles(graph) == [["app.a", "app.b"]]


# The one private module another file may import: the C build of app/index/vector.py's
# loops, whose only caller is that wrapper (it falls back to its Python twins without it).
COMPILED_TWINS = {("app.index.vector", "app.index._vector")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(module: str, source: str) -> list[str]:
    """Names of other app modules' private parts that `source` imports or reads: `from
    app.x import _y`, `import app._x`, and `m._y` on a name imported from app."""
    found: list[str] = []
    from_app: set[str] = set()  # local names bound to something imported from app
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "app":
                continue
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                if _private(alias.name) and (module, whole) not in COMPILED_TWINS:
                    found.append(whole)
                from_app.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "app":
                    continue
                if any(_private(p) for p in parts) and (module, alias.name) not in COMPILED_TWINS:
                    found.append(alias.name)
                from_app.add(alias.asname or parts[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in from_app:
                found.append(f"{ast.unparse(node.value)}.{node.attr}")
    return found


def test_no_file_in_app_uses_another_files_private_names() -> None:
    """A name another file uses is public: each part of a package shows the others one front."""
    uses = {}
    for path in sorted(APP.rglob("*.py")):
        module = ".".join(path.relative_to(APP.parent).with_suffix("").parts)
        if found := _private_uses(module, path.read_text(encoding="utf-8")):
            uses[str(path.relative_to(APP))] = found
    assert uses == {}


def test_a_private_name_used_across_files_would_be_found() -> None:
    source = (
        "import app.x._y\n"
        "from app.a import _b, c\n"
        "from app import d as e\n"
        "from app.index import _vector\n"
        "print(c._f, e._g, e.h._i, e.__doc__, e.j, self._k)\n"
    )
    assert _private_uses("app.m", source) == [
        "app.x._y",
        "app.a._b",
        "app.index._vector",
        "c._f",
        "e._g",
        "e.h._i",
    ]
    assert "app.index._vector" not in _private_uses("app.index.vector", source)
