"""The shape of tests/: a folder per part of the code it checks, test files that import
no other test file, and every shared helper in tests/support.

A test that imported another test's module ran that module's fixtures and tests' imports
with it, and its helpers were found by reading tests; a helper in tests/support is found
by its name.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS / "support"


def _refused_imports(source: str) -> list[str]:
    """The modules of tests/ that `source` imports other than tests/support's: test
    modules, conftests, helpers anywhere else; relative imports too."""
    refused = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                refused.append("." * node.level + (node.module or ""))
                continue
            modules = [node.module or ""]
            if node.module == "tests":
                modules = [f"tests.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        refused += [
            m for m in modules if m.startswith("tests.") and not m.startswith("tests.support")
        ]
    return refused


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_tests_import_helpers_only_from_tests_support() -> None:
    refused = {
        str(path.relative_to(TESTS)): found
        for path in _python_files()
        if (found := _refused_imports(path.read_text(encoding="utf-8")))
    }
    assert refused == {}


def test_a_test_module_or_a_helper_elsewhere_would_be_refused() -> None:
    assert _refused_imports("from tests.messages.test_http import user") == [
        "tests.messages.test_http"
    ]
    assert _refused_imports("import tests.fakellm") == ["tests.fakellm"]
    assert _refused_imports("from tests.process.conftest import Server") == [
        "tests.process.conftest"
    ]
    assert _refused_imports("from tests import fakellm, support") == ["tests.fakellm"]
    assert _refused_imports("def f():\n    from .test_tail import x\n") == [".test_tail"]
    assert _refused_imports("from tests.support.messages import user\nimport httpx") == []


def test_only_tests_support_holds_modules_that_are_not_tests() -> None:
    """Outside tests/support a module is a test file, a conftest or a package's marker."""
    stray = [
        str(path.relative_to(TESTS))
        for path in _python_files()
        if SUPPORT not in path.parents
        and path.name not in ("conftest.py", "__init__.py")
        and not path.name.startswith("test_")
    ]
    assert stray == []


def test_every_folder_of_tests_is_a_package() -> None:
    # Folders share file names (each domain has its test_http.py): pytest tells two
    # test_http modules apart only by their packages.
    folders = [p for p in TESTS.rglob("*") if p.is_dir() and p.name != "__pycache__"]
    assert [str(p.relative_to(TESTS)) for p in folders if not (p / "__init__.py").exists()] == []


def test_the_folders_conftest_runs_first_are_there() -> None:
    """tests/conftest.py hands xdist the slow folders first; a prefix that names no folder
    would leave them last again, silently."""
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    assigned = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    prefixes = ast.literal_eval(assigned["SLOW_FIRST"])
    assert prefixes and all(p.startswith("tests/") and p.endswith("/") for p in prefixes)
    assert [p for p in prefixes if not (TESTS.parent / p).is_dir()] == []
