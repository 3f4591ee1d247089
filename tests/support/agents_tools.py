"""The tool of the OpenAI Agents SDK agents in the client tests."""

from __future__ import annotations

from agents import function_tool

FILES = {"notes.txt": "alpha\nbeta\ngamma", "todo.md": "ship it"}


@function_tool
def read_file(path: str) -> str:
    """Read a text file of the project."""
    text = FILES.get(path)
    return f"{len(text.splitlines())} lines in {path}" if text else f"no file {path}"
