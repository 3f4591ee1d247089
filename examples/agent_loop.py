"""A tool-using agent whose memory is contextd, with any OpenAI-compatible model.

    CONTEXTD_URL=http://127.0.0.1:8080 \\
    OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... MODEL=gpt-4o-mini \\
        python examples/agent_loop.py --session demo "How long is README.md?"

The loop every agent on contextd runs:

1. append what the user said;
2. before every model call, ask contextd for the payload and send its `messages`
   to `chat.completions.create` unchanged: it fits the model's window, keeps the
   user's constraints and never splits a tool call from its results;
3. append what the model said, run the tools it asked for, append their results
   (one atomic batch per step; the client gives each message an id before the
   first attempt, so a retried append stores nothing twice);
4. repeat until the model answers without calling a tool.

The agent keeps no history of its own: run it again with the same `--session`
and it picks up where it stopped. One tool of its own, `read_file`, confined to
the folder the agent runs in; and contextd's `recall` tool (the session's
`recall` setting): when a payload leaves older messages out, it says so, and the
model can search the whole log and read any message back, which the client runs
(`contextd_client.recall.run_recall`). `--max-tokens` fits payloads to a smaller
budget than the model's window. Needs `pip install contextd-client openai`;
`CONTEXTD_API_KEY` if the server has keys.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from contextd_client import ContextdClient
from contextd_client.recall import RECALL_TOOL_NAME, run_recall
from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file of the working folder.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "relative path"}},
                "required": ["path"],
            },
        },
    }
]
SYSTEM = "You are a careful assistant. Use read_file to look at files before answering."


def read_file(path: str) -> str:
    root = Path.cwd().resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        return f"error: no file {path!r} in the working folder"
    text = target.read_text(errors="replace")
    return f"{len(text.splitlines())} lines in {path}\n{text}"


def run_tool(contextd: ContextdClient, session: str, call: dict[str, Any]) -> str:
    if call["function"]["name"] == RECALL_TOOL_NAME:  # contextd's own: the client runs it
        return run_recall(contextd, session, call["function"]["arguments"])
    try:
        args = json.loads(call["function"]["arguments"] or "{}")
    except json.JSONDecodeError:
        return "error: the arguments are not JSON"
    if call["function"]["name"] == "read_file":
        return read_file(str(args.get("path", "")))
    return f"error: no tool {call['function']['name']!r}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("question")
    p.add_argument("--session", default=f"agent-{uuid.uuid4().hex[:8]}")
    p.add_argument("--max-steps", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=None, help="payload budget")
    args = p.parse_args(argv)

    model = os.environ.get("MODEL", "gpt-4o-mini")
    llm = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    with ContextdClient() as contextd:  # CONTEXTD_URL and CONTEXTD_API_KEY
        # The session carries the system prompt and tools, so every payload has them, and
        # `recall`: payloads add the recall tool and say what they leave out.
        contextd.put_session(
            args.session, model=model, system_prompt=SYSTEM, tools=TOOLS, recall=True
        )
        contextd.append(args.session, [{"role": "user", "content": args.question}])

        for _ in range(args.max_steps):
            payload = contextd.context(args.session, max_tokens=args.max_tokens)
            reply = llm.chat.completions.create(
                model=model, messages=payload.messages, tools=payload.tools
            )
            message = reply.choices[0].message
            # Only the protocol fields: SDK-only ones (annotations, audio, ...) are not
            # part of a request message, and contextd would keep them verbatim.
            said: dict[str, Any] = {"role": "assistant", "content": message.content}
            calls = [
                c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls or []
            ]
            if calls:
                said["tool_calls"] = calls
            results = [
                {
                    "role": "tool",
                    "tool_call_id": c["id"],
                    "content": run_tool(contextd, args.session, c),
                }
                for c in calls
            ]
            contextd.append(args.session, [said, *results])
            if not calls:
                print(said.get("content") or "")
                return 0
    print("(no answer within --max-steps)", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
