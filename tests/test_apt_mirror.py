"""deploy/apt_mirror.py: the smoke test's base images come from the mirror the host's
apt uses, read from either format of apt sources, never from a host named in the repo."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("apt_mirror", ROOT / "deploy" / "apt_mirror.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _apt(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "sources.list.d").mkdir(exist_ok=True)
    return tmp_path


def test_deb822_sources_skip_security_and_disabled_stanzas(tmp_path: Path) -> None:
    apt = _apt(
        tmp_path,
        {
            "sources.list.d/debian.sources": (
                "Types: deb\nURIs: http://mirror.example/security\nSuites: bookworm-security\n\n"
                "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n"
                "Types: deb-src deb\n# a comment\nURIs: http://mirror.example/debian/\n"
                "Suites: bookworm bookworm-updates\nComponents: main\n"
            ),
            "sources.list.d/other.sources.disabled": (
                "Types: deb\nURIs: http://x.example/\nSuites: bookworm\n"
            ),
        },
    )
    assert _module().mirror("bookworm", apt) == "http://mirror.example/debian"


def test_one_line_sources_with_options(tmp_path: Path) -> None:
    apt = _apt(
        tmp_path,
        {
            "sources.list": (
                "# deb http://commented.example/debian bookworm main\n"
                "deb-src http://src.example/debian bookworm main\n"
                "deb [arch=amd64 signed-by=/k.gpg] http://one.example/debian bookworm main\n"
            )
        },
    )
    assert _module().mirror("bookworm", apt) == "http://one.example/debian"


def test_no_source_of_the_release_is_none(tmp_path: Path) -> None:
    apt = _apt(tmp_path, {"sources.list": "deb http://old.example/debian bullseye main\n"})
    assert _module().mirror("bookworm", apt) is None
