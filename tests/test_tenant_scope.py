"""Tenant scoping is written once, in app/db/scope.py: no statement of app/ filters on
`tenant_id` or `session_id` by hand.

A filter written by hand is where a statement forgets the tenant, or the session and
with it the partition (tests/db/test_partitioned.py). Read off the source: comparisons
of a `.tenant_id` or `.session_id` column in SQLAlchemy expressions, and equalities on
those columns in string literals (the raw SQL run on asyncpg or through `text()`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
HELPER = "app/db/scope.py"

# Folders whose files may filter by hand, and why.
EXEMPT_FOLDERS = {
    "app/db/migrations/": "a migration runs against the schema of its day and imports no live"
    " code, the helper included: what it writes must not change when the helper does",
}

# (file, top-level name) that may filter by hand, and why. Only statements that must differ
# from the helper's forms belong here.
ALLOWED = {
    ("app/compaction/repository.py", "_FAIR"): "the fair claim walks every tenant's queue:"
    " its comparisons link the walk's steps to each other, they scope no caller's tenant",
}

_COLUMNS = ("tenant_id", "session_id")
_IN_SQL = re.compile(r"\b(?:tenant_id|session_id)\s*=(?!=)")


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _is_column(node: ast.expr) -> bool:
    # A mapped class's column (`MessageRow.tenant_id`, an alias `J.session_id`) or a
    # table's (`t.c.tenant_id`); an instance's value (`job.tenant_id`) is no filter alone.
    if not (isinstance(node, ast.Attribute) and node.attr in _COLUMNS):
        return False
    owner = node.value
    if isinstance(owner, ast.Name):
        return owner.id.lstrip("_")[:1].isupper()
    return isinstance(owner, ast.Attribute) and owner.attr == "c"


def _by_hand(node: ast.AST, docstrings: set[int]) -> str | None:
    """The filter `node` writes by hand, if it writes one."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name | ast.Attribute)
        and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "tuple_"
        and any(_is_column(a) for a in node.args)
    ):
        return ast.unparse(node)  # a key of several sessions: `of_sessions`
    if isinstance(node, ast.Compare) and any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
        if any(_is_column(side) for side in (node.left, *node.comparators)):
            return ast.unparse(node)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ):
        if _IN_SQL.search(node.value):
            return " ".join(node.value.split())
    return None


def _top_level_name(statement: ast.stmt) -> str:
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return statement.name
    if isinstance(statement, ast.Assign | ast.AnnAssign):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return ", ".join(ast.unparse(t) for t in targets)
    return ast.unparse(statement).splitlines()[0]


def filters_by_hand(source: str) -> list[tuple[str, int, str]]:
    """(top-level name, line, text) of each filter written by hand in a module's source."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for statement in tree.body:
        for node in ast.walk(statement):
            text = _by_hand(node, docstrings)
            if text is not None and isinstance(node, ast.expr):
                found.append((_top_level_name(statement), node.lineno, text))
    return found


def _scanned() -> list[tuple[str, str]]:
    files = []
    for path in sorted(APP.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel != HELPER and not any(rel.startswith(f) for f in EXEMPT_FOLDERS):
            files.append((rel, path.read_text(encoding="utf-8")))
    return files


def test_no_statement_filters_on_the_tenant_by_hand() -> None:
    found = [
        f"{rel}:{line} in {name}: {text[:120]}"
        for rel, source in _scanned()
        for name, line, text in filters_by_hand(source)
        if (rel, name) not in ALLOWED
    ]
    assert found == [], "build these filters with app/db/scope.py:\n" + "\n".join(found)


def test_every_exception_is_still_needed() -> None:
    """An allowed statement that no longer filters by hand leaves the list."""
    used = {(rel, name) for rel, source in _scanned() for name, _, _ in filters_by_hand(source)}
    assert set(ALLOWED) - used == set()
    assert all((ROOT / folder).is_dir() for folder in EXEMPT_FOLDERS)


def test_the_scan_finds_both_forms() -> None:
    source = '''
def rows(tenant, sid):
    """WHERE tenant_id = $1 in a docstring is prose."""
    if row.tenant_id == tenant:  # two values, no statement
        return select(M).where(M.tenant_id == tenant, sid == M.session_id, t.c.tenant_id != x)

SQL = "SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.session_id = $2"
TEXT = f"""WHERE tenant_id = :tenant AND {rest}"""
FINE = select(M).where(of_session(M, tenant, sid), M.seq == 1)
MANY = select(M).where(tuple_(M.tenant_id, M.session_id).in_(keys))
ALSO = select(M).where(sa.tuple_(M.tenant_id, M.id).in_(keys), of_sessions(M, keys))
'''
    found = [(name, text) for name, _, text in filters_by_hand(source)]
    assert found == [
        ("rows", "M.tenant_id == tenant"),
        ("rows", "sid == M.session_id"),
        ("rows", "t.c.tenant_id != x"),
        ("SQL", "SELECT 1 FROM messages m WHERE m.tenant_id = $1 AND m.session_id = $2"),
        ("TEXT", "WHERE tenant_id = :tenant AND"),
        ("MANY", "tuple_(M.tenant_id, M.session_id)"),
        ("ALSO", "sa.tuple_(M.tenant_id, M.id)"),
    ]
