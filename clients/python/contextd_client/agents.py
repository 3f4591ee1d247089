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
calls never split from their results. `Runner.run` stores a turn's input before
the first model call and each step's items right after it, so the payload is
complete. `Runner.run_streamed` stores the input only after the filter has run:
the filter stores it first (the items of the model's input that follow the
history the session gave the run), and the SDK's own write of them is skipped.
"""

from __future__ import annotations

import json
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
    filter (`max_tokens`, `strategy`, `mode`, `reserve_output_tokens`, ...), except
    `format`: the filter asks for chat messages and converts them to the Responses
    items the SDK takes, whatever API the agent's model speaks (the SDK converts
    them for a chat-completions model). Any `format` but "openai" is refused with a
    ValueError here rather than handing the model an empty input later.
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
        fmt = context_options.pop("format", "openai")
        if fmt != "openai":
            raise ValueError(
                f"ContextdSession does not take format={fmt!r}: the model gets Responses "
                "items converted from contextd's chat payload whatever its API; leave "
                "`format` out"
            )
        self.context_options = context_options
        # How many items the last get_items returned, until anything is written: a
        # streamed run calls the filter before it stores its input (see the module
        # docstring), and its model input is that history followed by the new items.
        self._read: int | None = None
        # Keys of the items the filter stored ahead of the SDK's own add_items.
        self._ahead: list[str] = []

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with `limit`, only the latest `limit`."""
        items = await self._items(limit)
        self._read = len(items)
        return cast(list[TResponseInputItem], items)

    async def _items(self, limit: int | None) -> list[dict[str, Any]]:
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
        return items if limit is None else items[-limit:]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        self._read = None
        ahead, self._ahead = self._ahead, []
        plain = cast(list[dict[str, Any]], items)
        skip = 0
        while skip < min(len(ahead), len(plain)) and _key(plain[skip]) == ahead[skip]:
            skip += 1
        await self._append(plain[skip:])

    async def _append(self, items: list[dict[str, Any]]) -> None:
        if items:
            messages = items_to_messages(items)
            await self.client.append(self.session_id, messages, lock_token=self.lock_token)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the latest item. When it shares a message with others (parallel
        tool calls), the message is deleted and stored again without it."""
        self._read = None
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
        self._read = None
        try:
            await self.client.clear(self.session_id, lock_token=self.lock_token)
        except NotFound:
            return

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Use as `RunConfig(call_model_input_filter=session.call_model_input_filter)`:
        the model gets contextd's payload, budgeted with the agent's instructions and
        tools, instead of the whole history. An agent without function tools asks
        with `tools=[]`: the session's stored tools, which the model does not get,
        are not budgeted."""
        given = cast(list[dict[str, Any]], data.model_data.input)
        if self._read is not None and len(given) > self._read:
            unsaved = given[self._read :]
            await self._append(unsaved)
            self._ahead = [_key(i) for i in unsaved]
        self._read = None
        try:
            payload = await self.client.context(
                self.session_id,
                system=data.model_data.instructions,
                tools=_tool_schemas(data.agent),
                **self.context_options,
            )
        except NotFound:  # a new session and nothing to store yet: no history either
            return data.model_data
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
            # One argument alone is a valid call: strict mode would require them all.
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


def _key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)


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
