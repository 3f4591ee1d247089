"""The OpenAI Agents SDK with contextd as the agent's memory.

    CONTEXTD_URL=http://127.0.0.1:8080 \\
    OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... MODEL=gpt-4o-mini \\
        python examples/agents_sdk.py --session demo "How long is README.md?"

`ContextdSession` is the SDK's `Session`: the Runner stores every item of the
run in contextd and reads the history back from it. Its
`call_model_input_filter` replaces the history the SDK would send whole with
contextd's payload: fitted to the model's window, old turns as a summary once
compacted, large tool outputs as previews, tool calls never split from their
results. Run it again with the same `--session` and the agent remembers;
`--undo` pops the last item (an agent taking back its last step).

Needs `pip install contextd-client[agents]`; `CONTEXTD_API_KEY` if the server
has keys. The model is reached through Chat Completions, so any
OpenAI-compatible endpoint works.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from contextd_client import AsyncContextdClient
from contextd_client.agents import ContextdSession
from openai import AsyncOpenAI


@function_tool
def read_file(path: str) -> str:
    """Read a text file of the working folder."""
    root = Path.cwd().resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return f"error: no file {path!r} in the working folder"
    text = target.read_text(errors="replace")
    return f"{len(text.splitlines())} lines in {path}\n{text}"


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("question", nargs="?")
    p.add_argument("--session", default=f"agents-{uuid.uuid4().hex[:8]}")
    p.add_argument("--undo", action="store_true", help="pop the session's last item and exit")
    args = p.parse_args(argv)
    set_tracing_disabled(True)  # traces would go to OpenAI's platform: opt in, not by default

    async with AsyncContextdClient() as contextd, AsyncOpenAI() as llm:
        session = ContextdSession(args.session, contextd)
        if args.undo:
            print(await session.pop_item())
            return 0
        if not args.question:
            p.error("a question, or --undo")
        agent = Agent(
            name="files",
            instructions="You are a careful assistant. Use read_file before answering.",
            tools=[read_file],
            model=OpenAIChatCompletionsModel(os.environ.get("MODEL", "gpt-4o-mini"), llm),
        )
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        result = await Runner.run(agent, args.question, session=session, run_config=config)
        print(result.final_output)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
