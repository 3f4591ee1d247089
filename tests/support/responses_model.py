"""A scripted model on OpenAI's Responses API, for `httpx2.MockTransport` (`openai`
speaks httpx2, not httpx)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2


class ResponsesModel:
    """`POST /v1/responses` as a scripted agent.

    After a user message it calls the request's first function tool with
    `{"path": <the message's last word>}`; after a tool output it answers
    `Done. The tool said: <its first line>`; without tools, `Echo: <the user's text>`.
    With `reasoning`, a reasoning item and a preamble ("Let me look.") come before a
    call, as a reasoning model sends them. Streams when asked to; keeps each body.
    """

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.reasoning = False
        self._ids = itertools.count(1)

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        response = {
            "id": f"resp_{next(self._ids)}", "object": "response", "created_at": 0,
            "model": body.get("model", "gpt-4o-mini"), "output": self._output(body),
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "status": "completed", "metadata": {}, "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        }  # fmt: skip
        if not body.get("stream"):
            return httpx2.Response(200, json=response)
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": {**response, "output": []}})
        ]
        for i, item in enumerate(response["output"]):
            events.append(("response.output_item.added", {"output_index": i, "item": item}))
            events.append(("response.output_item.done", {"output_index": i, "item": item}))
        events.append(("response.completed", {"response": response}))
        sse = "".join(
            f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': n, **data})}\n\n"
            for n, (kind, data) in enumerate(events)
        )
        return httpx2.Response(200, text=sse, headers={"content-type": "text/event-stream"})

    def _output(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        given = body["input"]
        last = {"role": "user", "content": given} if isinstance(given, str) else given[-1]
        tools = [t["name"] for t in body.get("tools") or [] if t.get("type") == "function"]
        n = next(self._ids)
        if last.get("type") == "function_call_output":
            first = str(last.get("output", "")).splitlines()[:1]
            return [self._message(f"Done. The tool said: {first[0] if first else ''}", n)]
        text = _text(last.get("content"))
        if not tools:
            return [self._message(f"Echo: {text}", n)]
        words = text.split()
        arguments = json.dumps({"path": words[-1].strip("?.!") if words else ""})
        call = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                "name": tools[0], "arguments": arguments, "status": "completed"}  # fmt: skip
        if not self.reasoning:
            return [call]
        summary = [{"type": "summary_text", "text": "The user wants a count."}]
        thought = {"type": "reasoning", "id": f"rs_{n}", "summary": summary}
        return [thought, self._message("Let me look.", n), call]

    @staticmethod
    def _message(text: str, n: int) -> dict[str, Any]:
        return {
            "type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }  # fmt: skip


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
