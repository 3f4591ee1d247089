"""contextd as the memory of an OpenAI Agents SDK agent (`pip install contextd-client[agents]`).

    from agents import Agent, RunConfig, Runner
    from contextd_client.agents import ContextdSession

    session = ContextdSession("user-42")
    config = RunConfig(call_model_input_filter=session.call_model_input_filter)
    result = await Runner.run(agent, "Hi!", session=session, run_config=config)

`session.recall_tool()` is contextd's recall tool as an SDK `FunctionTool`: the
model searches the whole log and reads back what trimming or compaction left out.

`ContextdSession` implements the SDK's `Session` protocol on contextd's log:
items are stored as chat messages (see `contextd_client._responses` for the
mapping, which loses nothing), `get_items(limit)` reads the tail, `pop_item`
deletes it, `clear_session` empties the log and keeps the session's settings.

The SDK sends the model the whole history the session returns. With
`call_model_input_filter` the model gets contextd's payload instead: fitted to
the window, compacted turns as a summary, large tool outputs as previews, tool
calls never split from their results. The SDK stores a turn's input before the
model call and each step's items right after it, so the payload is complete.
"""

from __future__ import annotations

from typing import Any, cast

from agents import Agent, FunctionTool, TResponseInputItem
from agents.memory import SessionSettings
from agents.run_config import CallModelData, ModelInputData

from contextd_client._async_client import AsyncContextdClient
from contextd_client._exceptions import NotFound
from contextd_client._models import Message
from contextd_client._responses import chat_to_items, items_to_messages, message_to_items
from contextd_client.recall import (
    RECALL_DESCRIPTION,
    RECALL_PARAMETERS,
    RECALL_TOOL_NAME,
    arun_recall,
)

__all__ = ["ContextdSession"]

PAGE = 100


class ContextdSession:
    """An Agents SDK `Session` whose items live in a contextd session.

    `client` defaults to an `AsyncContextdClient` for `$CONTEXTD_URL`. Writes carry
    `lock_token` when one is given (a lease held with `client.lease(...)`).
    `context_options` are passed to every `client.context(...)` call of the input
    filter (`max_tokens`, `strategy`, `mode`, `reserve_output_tokens`, ...).
    """

    def __init__(
        self,
        session_id: str,
        client: AsyncContextdClient | None = None,
        *,
        lock_token: str | None = None,
        session_settings: SessionSettings | None = None,
        **context_options: Any,
    ) -> None:
        self.session_id = session_id
        self.client = client or AsyncContextdClient()
        self.lock_token = lock_token
        self.session_settings = session_settings
        self.context_options = context_options

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with `limit`, only the latest `limit`."""
        if limit is not None and limit <= 0:
            return []
        try:
            if limit is None:
                messages = await self._all_messages()
            else:
                # A message holds one item or more: `limit` messages hold enough items.
                messages = await self.client.tail(self.session_id, limit)
        except NotFound:
            return []
        items = [item for m in messages for item in message_to_items(_stored(m))]
        if limit is not None:
            items = items[-limit:]
        return cast(list[TResponseInputItem], items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        messages = items_to_messages(cast(list[dict[str, Any]], items))
        await self.client.append(self.session_id, messages, lock_token=self.lock_token)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the latest item. When it shares a message with others (parallel
        tool calls), the message is deleted and stored again without it."""
        try:
            tail = await self.client.tail(self.session_id, 1)
        except NotFound:
            return None
        if not tail:
            return None
        last = tail[0]
        items = message_to_items(_stored(last))
        await self.client.delete_tail(self.session_id, last.seq, lock_token=self.lock_token)
        if len(items) > 1:
            rest = items_to_messages(items[:-1])
            await self.client.append(self.session_id, rest, lock_token=self.lock_token)
        return cast(TResponseInputItem, items[-1])

    async def clear_session(self) -> None:
        """Empty the log, summary and watermark; the session's settings stay."""
        try:
            await self.client.clear(self.session_id, lock_token=self.lock_token)
        except NotFound:
            return

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Use as `RunConfig(call_model_input_filter=session.call_model_input_filter)`:
        the model gets contextd's payload, budgeted with the agent's instructions and
        tools, instead of the whole history."""
        tools = _tool_schemas(data.agent)
        payload = await self.client.context(
            self.session_id,
            system=data.model_data.instructions,
            tools=tools or None,
            **self.context_options,
        )
        # The system block (the instructions) is the payload's head: it goes as input
        # messages, so what the model reads is exactly what contextd counted.
        items = chat_to_items(payload.messages)
        return ModelInputData(input=cast(list[TResponseInputItem], items), instructions=None)

    def recall_tool(self) -> FunctionTool:
        """The recall tool as an Agents SDK tool, run on this session: give it to the
        agent (`Agent(tools=[..., session.recall_tool()])`) and the model can search
        the whole log and read back what the payload left out. With it among the
        agent's tools the input filter budgets for it like any other."""

        async def invoke(ctx: Any, arguments: str) -> str:
            return await arun_recall(self.client, self.session_id, arguments)

        return FunctionTool(
            name=RECALL_TOOL_NAME,
            description=RECALL_DESCRIPTION,
            params_json_schema=RECALL_PARAMETERS,
            on_invoke_tool=invoke,
            # Either argument alone is a valid call: strict mode would require both.
            strict_json_schema=False,
        )

    async def _all_messages(self) -> list[Message]:
        out: list[Message] = []
        after = 0
        while True:
            page = await self.client.messages(self.session_id, after_seq=after, limit=PAGE)
            out.extend(page.messages)
            if page.next_after_seq is None or not page.messages:
                return out
            after = page.next_after_seq


def _stored(m: Message) -> dict[str, Any]:
    return {**m.chat(), "metadata": m.metadata}


def _tool_schemas(agent: Agent[Any]) -> list[dict[str, Any]]:
    """The agent's function tools as chat `tools`, so contextd budgets for them."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.params_json_schema,
            },
        }
        for t in agent.tools
        if isinstance(t, FunctionTool)
    ]
