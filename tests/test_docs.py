"""The documentation stands alone: a short README, an index of docs/, a reference
that is what the code says, and no link or path that leaves the repository."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "clients" / "python" / "README.md",
    ROOT / "app" / "context" / "strategies" / "README.md",
]
# Pages other engineers write: docs/README.md keeps a marked place for each.
ELSEWHERE = {"recall.md", "typescript.md", "agent-loop.md"}
# Spelled in pieces, so this file does not name it.
MACHINE_PATH = "/" + "work" + "/"
_LINK = re.compile(r"\]\(([^)\s]+)\)|<(https?://[^>]+)>")


def _reference_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "docs" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_what_the_code_says() -> None:
    fresh = _reference_module().render()
    committed = (ROOT / "docs" / "reference.md").read_text()
    assert committed == fresh, "docs/reference.md is stale: run `make docs`"


def test_the_reference_names_every_route_and_setting() -> None:
    text = (ROOT / "docs" / "reference.md").read_text()
    for needle in (
        "### `POST /sessions/{session_id}/messages`",
        "### `GET /sessions/{session_id}/context`",
        "| `CONTEXTD_DATABASE_URL` |",
        "| `COMPACTION_MIN_PRESERVED_STEPS` |",
    ):
        assert needle in text


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_link_stays_in_the_repository_and_resolves() -> None:
    for page in PAGES:
        for relative, absolute in _LINK.findall(page.read_text()):
            where = f"{page.relative_to(ROOT)}: {relative or absolute}"
            if absolute:
                # Only the local server a reader runs (`make serve`).
                assert absolute.startswith("http://127.0.0.1:"), where
                continue
            assert not relative.startswith(("http:", "https:", "//", "/")), where
            path, _, anchor = relative.partition("#")
            target = (page.parent / path).resolve() if path else page
            assert target.is_relative_to(ROOT), where
            assert target.exists(), where
            if anchor and target.suffix == ".md":
                assert anchor in _anchors(target), where


def _anchors(page: Path) -> set[str]:
    """The heading anchors a Markdown renderer makes (lower case, punctuation dropped,
    spaces as hyphens)."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_docs_has_an_index_of_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        if page.name != "README.md":
            assert f"]({page.name})" in index, f"docs/README.md does not link {page.name}"
    for name in ELSEWHERE:  # a marked place until the page lands, then a link
        assert name in index


def test_no_tracked_file_names_a_path_of_a_build_machine() -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    named = []
    for name in filter(None, files):
        path = ROOT / name.decode()
        if path.is_symlink():
            named.append(f"{name.decode()} (a symlink)")
            continue
        if path.suffix in {".png", ".ico", ".svg"} or not path.is_file():
            continue
        if MACHINE_PATH in path.read_text(errors="replace"):
            named.append(name.decode())
    assert not named, named


# A bench that a page, the Makefile or a source file names either exists, with every
# option given to it there, or is marked in the same section (a Markdown heading's
# span; a whole file otherwise) as a past measurement: "`bench/<name>.py` (since
# removed, last at <commit>)", where <commit> still holds it. An option a bench no
# longer has is marked the same way: "`--<option>` (since removed, last at <commit>)".
_BENCH = re.compile(r"(?<![\w/])bench/(\w+\.(?:py|sh))")
_OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")
_REMOVED = r"`?,? \(?since removed, last at ([0-9a-f]{7,40})"


def _bench_citing_files() -> list[Path]:
    sources = [ROOT / "Makefile", *PAGES]
    for folder in ("app", "bench", "tests", "deploy"):
        sources += sorted((ROOT / folder).rglob("*.py"))
    return [p for p in sources if p.name != "test_docs.py"]


def _sections(path: Path) -> list[str]:
    """A Markdown page cut at its headings (not at a `#` line inside a fenced block)."""
    if path.suffix != ".md":
        return [path.read_text()]
    sections: list[list[str]] = [[]]
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            sections.append([])
        sections[-1].append(line)
    return ["\n".join(s) for s in sections]


def _command_tail(section: str, end: int, prose: bool) -> str:
    """What follows a bench's name in its command: in Markdown prose, to the closing
    backtick; elsewhere (a fenced block, a source file) to the end of its line and of
    the lines a backslash continues, or to a backtick before."""
    if prose and not section.count("```", 0, end) % 2:
        closing = section.find("`", end)
        return section[end:closing] if 0 <= closing - end <= 300 else ""
    tail, _, rest = section[end:].partition("\n")
    while tail.rstrip().endswith("\\") and rest:
        line, _, rest = rest.partition("\n")
        tail += " " + line
    return tail.partition("`")[0]


def _holds(commit: str, path: str) -> bool:
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if shallow != "false":  # a shallow clone may not have the commit: nothing to check
        return True
    found = subprocess.run(["git", "cat-file", "-e", f"{commit}:{path}"], cwd=ROOT)
    return found.returncode == 0


def test_every_bench_named_exists_or_is_marked_as_past() -> None:
    wrong = []
    for path in _bench_citing_files():
        for section in _sections(path):
            flat = " ".join(re.sub(r"^\s*#+", " ", section, flags=re.M).split())  # comments
            for m in _BENCH.finditer(section):
                where = f"{path.relative_to(ROOT)}: bench/{m.group(1)}"
                script = ROOT / "bench" / m.group(1)
                if not script.exists():
                    marked = re.search(rf"bench/{re.escape(m.group(1))}{_REMOVED}", flat)
                    if marked is None or not _holds(marked.group(1), f"bench/{m.group(1)}"):
                        wrong.append(f"{where} is gone and not marked as past")
                    continue
                source = script.read_text()
                if "bench.common import" in source:  # some options come from bench/common.py
                    source += (ROOT / "bench" / "common.py").read_text()
                prose = path.suffix == ".md"
                for option in _OPTION.findall(_command_tail(section, m.end(), prose)):
                    if f'"{option}"' in source:
                        continue
                    if not re.search(rf"{re.escape(option)}{_REMOVED}", flat):
                        wrong.append(f"{where} has no {option}, and it is not marked as past")
    assert not wrong, "\n".join(sorted(set(wrong)))
