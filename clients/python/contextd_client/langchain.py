"""contextd for LangChain v1 (`pip install contextd-client[langchain]`).

- `ContextdChatMessageHistory`: a `BaseChatMessageHistory` (sync and async) on a
  contextd session, for `RunnableWithMessageHistory` and friends.
- `ContextdMiddleware`: an agent middleware for `create_agent`. Before every
  model call (`before_model`) it stores what the agent added since the last
  call (the user's input, the model's tool calls and their results) and
  replaces the agent's messages with contextd's payload: the model reads a
  history fitted to its window, and the graph state stays small however long
  the run. When the agent ends (`after_agent`) the final answer is stored too.

    agent = create_agent(model, tools, middleware=[ContextdMiddleware("user-42")])
    agent.invoke({"messages": [{"role": "user", "content": "Hi!"}]})

Messages are stored as OpenAI chat messages (what contextd assembles payloads
from); the LangChain message itself is kept in `metadata["langchain"]`, so the
history gives back exactly the messages it was given. An AI message of the
Responses API (`ChatOpenAI(use_responses_api=True)`) holds Responses blocks: its
chat content keeps their text, its calls are its `tool_calls`, and its reasoning
is left to the kept message (a chat model takes none).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    convert_to_messages,
    convert_to_openai_messages,
    message_to_dict,
    messages_from_dict,
)
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from contextd_client._async_client import AsyncContextdClient
from contextd_client._client import ContextdClient
from contextd_client._exceptions import NotFound
from contextd_client._models import Context, Message
from contextd_client.recall import (
    RECALL_DESCRIPTION,
    RECALL_PARAMETERS,
    RECALL_TOOL_NAME,
    arun_recall,
    run_recall,
)

__all__ = [
    "ContextdChatMessageHistory",
    "ContextdMiddleware",
    "from_stored",
    "recall_tool",
    "to_stored",
]

LC_KEY = "langchain"
# Ids of the messages a payload put into the agent's state: they are contextd's
# already, and never stored again.
PAYLOAD_ID_PREFIX = "contextd-payload:"
PAGE = 100
# Responses text blocks; chat `text` parts stay as they are (cache_control and all).
TEXT_KINDS = ("input_text", "output_text")


def to_stored(message: BaseMessage) -> dict[str, Any]:
    """The chat message contextd stores for a LangChain message, with the message
    itself in metadata (its content left out when the chat content is the same)."""
    chat: dict[str, Any] = convert_to_openai_messages(message)
    if chat.get("role") == "assistant":
        chat["content"] = _assistant_content(chat.get("content"))
        if chat.get("tool_calls") and not chat["content"]:
            chat["content"] = None
    elif isinstance(chat.get("content"), list):
        chat["content"] = [_text_part(p) or p for p in chat["content"]]
    lc = json.loads(json.dumps(message_to_dict(message), default=str))
    if lc["data"].get("content") == chat.get("content"):
        del lc["data"]["content"]
    out = {**chat, "metadata": {LC_KEY: lc}}
    if message.id:
        out["id"] = message.id  # stored once however often it is sent
    return out


def _text_part(part: Any) -> dict[str, Any] | None:
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if isinstance(part, dict) and part.get("type") == "text":
        return part
    if isinstance(part, dict) and part.get("type") in TEXT_KINDS:
        return {"type": "text", "text": str(part.get("text", ""))}
    return None


def _assistant_content(content: Any) -> Any:
    """Chat assistant content: text and refusals. Responses blocks beside them are
    dropped here, as the message kept in metadata has them: `function_call` is in
    `tool_calls` already, and a chat model takes no reasoning or server tool calls."""
    if not isinstance(content, list):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        text = _text_part(part)
        if text is not None:
            parts.append(text)
        elif isinstance(part, dict) and part.get("type") == "refusal":
            parts.append({"type": "refusal", "refusal": str(part.get("refusal", ""))})
    return parts or ""


def from_stored(message: Message) -> BaseMessage:
    """The LangChain message a stored contextd message stands for."""
    lc = (message.metadata or {}).get(LC_KEY)
    if isinstance(lc, dict) and isinstance(lc.get("data"), dict):
        data = {"content": message.content, **lc["data"]}
        return messages_from_dict([{"type": lc["type"], "data": data}])[0]
    return convert_to_messages([message.chat()])[0]


def _page_all(client: ContextdClient, session_id: str) -> list[Message]:
    out: list[Message] = []
    after = 0
    while True:
        page = client.messages(session_id, after_seq=after, limit=PAGE)
        out.extend(page.messages)
        if page.next_after_seq is None or not page.messages:
            return out
        after = page.next_after_seq


async def _apage_all(client: AsyncContextdClient, session_id: str) -> list[Message]:
    out: list[Message] = []
    after = 0
    while True:
        page = await client.messages(session_id, after_seq=after, limit=PAGE)
        out.extend(page.messages)
        if page.next_after_seq is None or not page.messages:
            return out
        after = page.next_after_seq


class ContextdChatMessageHistory(BaseChatMessageHistory):
    """Chat history in a contextd session. Give `client` for the sync methods,
    `async_client` for the async ones, or neither for both on `$CONTEXTD_URL`."""

    def __init__(
        self,
        session_id: str,
        client: ContextdClient | None = None,
        *,
        async_client: AsyncContextdClient | None = None,
    ) -> None:
        self.session_id = session_id
        if client is None and async_client is None:
            client, async_client = ContextdClient(), AsyncContextdClient()
        self.client = client
        self.async_client = async_client

    def _sync(self) -> ContextdClient:
        if self.client is None:
            raise RuntimeError("this history has only an async client: use the a* methods")
        return self.client

    def _async(self) -> AsyncContextdClient:
        if self.async_client is None:
            raise RuntimeError("this history has only a sync client: use the sync methods")
        return self.async_client

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        try:
            return [from_stored(m) for m in _page_all(self._sync(), self.session_id)]
        except NotFound:
            return []

    async def aget_messages(self) -> list[BaseMessage]:
        try:
            return [from_stored(m) for m in await _apage_all(self._async(), self.session_id)]
        except NotFound:
            return []

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            self._sync().append(self.session_id, [to_stored(m) for m in messages])

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        if messages:
            await self._async().append(self.session_id, [to_stored(m) for m in messages])

    def clear(self) -> None:
        """Empty the log; the session's settings (system prompt, tools) stay."""
        try:
            self._sync().clear(self.session_id)
        except NotFound:
            return

    async def aclear(self) -> None:
        try:
            await self._async().clear(self.session_id)
        except NotFound:
            return


def recall_tool(
    session_id: str,
    client: ContextdClient | None = None,
    *,
    async_client: AsyncContextdClient | None = None,
) -> BaseTool:
    """contextd's recall tool as a LangChain tool on `session_id`: the model searches the
    whole log (`query`), reads one message in full (`seq`) or the messages a summary item
    cites (`seqs`). Sync calls need `client`, async ones `async_client`."""

    def run(**arguments: Any) -> str:
        if client is None:
            raise RuntimeError("this recall tool has only an async client: invoke it async")
        return run_recall(client, session_id, arguments)

    async def arun(**arguments: Any) -> str:
        if async_client is None:
            # The blocking client in a thread: on the event loop its HTTP call would
            # stall every other task of an async agent until contextd answered.
            return await asyncio.to_thread(run, **arguments)
        return await arun_recall(async_client, session_id, arguments)

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=RECALL_TOOL_NAME,
        description=RECALL_DESCRIPTION,
        args_schema=RECALL_PARAMETERS,
    )


def _unsaved(state: AgentState[Any]) -> list[dict[str, Any]]:
    return [
        to_stored(m) for m in state["messages"] if not (m.id or "").startswith(PAYLOAD_ID_PREFIX)
    ]


def _feed(payload: Context) -> dict[str, Any]:
    messages: list[AnyMessage] = list(convert_to_messages(payload.messages))  # type: ignore[arg-type]
    for i, m in enumerate(messages):
        m.id = f"{PAYLOAD_ID_PREFIX}{i}"
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}


class ContextdMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Feeds a `create_agent` agent's model from contextd (see the module docstring).

    Put the system prompt and tools in the session (`client.put_session(...)`) so
    contextd budgets for them, and leave `create_agent`'s `system_prompt` unset.
    `context_options` go to every context call (`max_tokens`, `strategy`, ...), except
    `format`: the middleware asks for chat messages and hands the agent LangChain
    messages, which the chat model converts for its API (OpenAI's Responses API,
    Anthropic, ...). Any `format` but "openai" is refused with a ValueError here
    rather than feeding the model an empty history later; on Anthropic, add
    `AnthropicPromptCachingMiddleware` for the cache breakpoints.
    With `recall=True` the middleware registers contextd's recall tool with the agent
    (`recall_tool`), and its payloads carry the recall tool's definition and the note
    on what was left out, so the budget counts both.
    """

    def __init__(
        self,
        session_id: str,
        client: ContextdClient | None = None,
        *,
        async_client: AsyncContextdClient | None = None,
        lock_token: str | None = None,
        recall: bool = False,
        **context_options: Any,
    ) -> None:
        super().__init__()
        self.session_id = session_id
        if client is None and async_client is None:
            client, async_client = ContextdClient(), AsyncContextdClient()
        self.client = client
        self.async_client = async_client
        self.lock_token = lock_token
        fmt = context_options.pop("format", "openai")
        if fmt != "openai":
            raise ValueError(
                f"ContextdMiddleware does not take format={fmt!r}: the agent gets "
                "LangChain messages converted from contextd's chat payload whatever its "
                "model's API; leave `format` out"
            )
        self.context_options = context_options
        if recall:
            self.context_options["recall"] = True
            self.tools = [recall_tool(session_id, client, async_client=async_client)]

    def _sync(self) -> ContextdClient:
        if self.client is None:
            raise RuntimeError("this middleware has only an async client: invoke the agent async")
        return self.client

    def _async(self) -> AsyncContextdClient:
        if self.async_client is None:
            raise RuntimeError("this middleware has only a sync client: invoke the agent sync")
        return self.async_client

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._store(state)
        return _feed(self._sync().context(self.session_id, **self.context_options))

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await self._astore(state)
        return _feed(await self._async().context(self.session_id, **self.context_options))

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._store(state)
        return None

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        await self._astore(state)
        return None

    def _store(self, state: AgentState[Any]) -> None:
        # Messages keep their LangChain ids as contextd ids: one stored earlier is a
        # replay, stored once.
        batch = _unsaved(state)
        if batch:
            self._sync().append(self.session_id, batch, lock_token=self.lock_token)

    async def _astore(self, state: AgentState[Any]) -> None:
        batch = _unsaved(state)
        if batch:
            await self._async().append(self.session_id, batch, lock_token=self.lock_token)
