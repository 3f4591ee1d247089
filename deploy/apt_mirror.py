"""Print the Debian mirror this host's apt uses (deploy/smoke.sh builds base images from it).

Read from the apt sources, both formats (one-line `.list` and deb822 `.sources`): the
first enabled `deb` source of the host's own Debian release (its suites name the
release's codename), not the security archive. Exits 1 when there is none (a host
that is not Debian): the caller then asks for CONTEXTD_DEPLOY_MIRROR.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

APT = Path("/etc/apt")


def _codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    fields = dict(line.split("=", 1) for line in os_release.read_text().splitlines() if "=" in line)
    if fields.get("ID", "").strip('"') != "debian":
        return None
    return fields.get("VERSION_CODENAME", "").strip('"') or None


def _one_line(path: Path) -> Iterator[tuple[str, list[str]]]:
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) < 3 or words[0] != "deb":
            continue
        words = words[1:]
        if words[0].startswith("["):  # options: [arch=amd64 signed-by=...]
            while not words[0].endswith("]"):
                words.pop(0)
            words.pop(0)
        yield words[0], words[1:2]


def _deb822(path: Path) -> Iterator[tuple[str, list[str]]]:
    for stanza in path.read_text().split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        suites = fields.get("suites", "").split()
        for uri in fields.get("uris", "").split():
            yield uri, suites


def sources(apt: Path = APT) -> Iterator[tuple[str, list[str]]]:
    if (apt / "sources.list").is_file():
        yield from _one_line(apt / "sources.list")
    for path in sorted((apt / "sources.list.d").glob("*")):
        if path.suffix == ".list":
            yield from _one_line(path)
        elif path.suffix == ".sources":
            yield from _deb822(path)


def mirror(codename: str, apt: Path = APT) -> str | None:
    for uri, suites in sources(apt):
        if codename in suites and "security" not in uri:
            return uri.rstrip("/")
    return None


def main() -> int:
    codename = _codename()
    found = mirror(codename, APT) if codename else None
    if not found:
        print("no Debian mirror in this host's apt sources", file=sys.stderr)
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
