"""The tool of the LangChain agents in the client tests."""

from __future__ import annotations

from langchain_core.tools import tool

FILES = {"notes.txt": "alpha\nbeta\ngamma", "todo.md": "ship it"}


@tool
def read_file(path: str) -> str:
    """Read a text file of the project."""
    text = FILES.get(path)
    return f"{len(text.splitlines())} lines in {path}" if text else f"no file {path}"
