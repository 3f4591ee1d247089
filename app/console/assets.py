"""Which console paths are public. Imports nothing: the auth middleware reads it."""

from __future__ import annotations

# Only these files are served: a fixed list, so no request path reaches the filesystem.
ASSETS = {
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}


def is_public_path(path: str) -> bool:
    """The page and its assets need no key (the key is typed into the page);
    /ui/api/* does, like the rest of the API."""
    return path in ("/ui", "/ui/") or (
        path.startswith("/ui/static/") and path.removeprefix("/ui/static/") in ASSETS
    )
