"""A real OpenAI-compatible chat-completions server for tests, with switchable behaviours.

    async with FakeLLM() as llm:
        client = ChatModelClient(base_url=llm.base_url, model="fake")
        llm.behaviour = "500"                 # every call from now on
        llm.script("omit_anchors", "normal")  # the next two calls, then `behaviour` again
        ...
        assert llm.call_count == 2

It speaks HTTP/1.1 over a real socket on 127.0.0.1 (a free port), with
keep-alive, so the client under test goes through its full transport stack.
Behaviours:

- ``normal``: a faithful JSON summary built from the prompt it was sent
  (range lines, constraint sentences, the anchors and identifiers it was asked
  to keep, merged with the previous summary), shrunk to fit ``max_tokens``;
  deterministic, no model
- ``slow``: ``normal`` after ``slow_s`` seconds; ``timeout``: no answer until
  the server stops
- ``500``: HTTP 500; ``503``: HTTP 503; ``429``: HTTP 429 with ``Retry-After:
  <retry_after>`` (``"1"`` unless set); ``garbage``: HTTP 200 with a body that is not JSON;
  ``drop_connection``: the socket is closed without an answer
- ``refuse``: a ``refusal`` field; ``refuse_text``: "I'm sorry, I can't ..."
- ``not_json``: prose instead of JSON; ``wrong_types``: JSON with strings
  where lists belong; ``empty``: empty content; ``truncate``: half the JSON,
  ``finish_reason: "length"``
- ``omit_anchors``: ``normal`` without any item that contains an anchor
- ``minimal``: a valid summary of one vague timeline entry (no anchors, no identifiers)
- ``english``: a plausible summary in English whatever the conversation's language
- stand-ins that lose things on purpose (each a ``normal`` summary, then): ``paraphrase``
  rewrites every path ("the file") and number ("a few"); ``drop_oldest`` summarises only
  the newer half of the range's lines (the previous summary kept); ``invent_seq`` cites
  a seq past the range's end in every other item, and the range's first seq in the rest
- stand-ins that invent, as SmolLM2-135M did (each a ``normal`` summary plus, as facts
  citing the seq they garble): ``invent_number`` a number of the range with ``.0``
  added (`8443.0`), alone and in a sentence, the range's first snake_case id with its
  last ``_`` dropped and capitalised (`Omar_rossi1241` for `omar_rossi_1241`), and the
  list ``1, 2, 3, …, 17``; ``echo_prompt`` the instructions' own words (``the order of
  events, one short line each``, ``user_prefs``) as timeline items; ``invent_fact`` a
  sentence the range never says, in the conversation's language
- ``recall``: an agent that recalls, for requests that offer a ``recall`` tool: after a
  user message it calls ``recall`` with ``{"query": <the last word of the user
  message>}``; after that answer, ``recall`` with ``{"seq": <the first "seq N" the
  answer names>}``; after that, it answers ``Recalled: <the line of the result that
  holds the query>`` (or ``Recalled nothing``)
- ``agent``: a tool-using agent, for requests that offer ``tools``: after a user
  message it calls the first tool with ``{"path": <the last word of the user
  message>}``; after tool results it answers, quoting the first line of the last
  result. Summarisation requests (no ``tools``) get ``normal``

Endpoint traits (attributes, apply to every behaviour):

- ``reasoning = True``: answers 400 like OpenAI's reasoning models to a request
  with ``max_tokens`` ("Unsupported parameter: 'max_tokens' ...") or a temperature
  other than 1 ("Unsupported value: 'temperature' ...")
- ``json_schema = False``: answers 400 to ``response_format`` of type ``json_schema``;
  ``response_format = False``: to any ``response_format``
- ``llama_cpp = True``: as llama-cpp-python's server does: a 500 quoting its request
  validation error to ``response_format`` of type ``json_schema`` (it takes only
  ``json_object``, with the schema in a ``schema`` key)
- ``usage = False``: answers without ``usage`` (as llama.cpp's streams, some proxies)
- ``bare_500_to_json_schema = True``: a 500 saying nothing but "Internal Server
  Error" to ``json_schema`` (a proxy hiding the endpoint's refusal)
- ``sloppy``: what a small model writes: prose and a code fence around the JSON, a
  section as a string, items as objects, sections missing

``script(Raw(status, body, headers))`` queues one literal answer.

Every request is recorded in ``calls`` (headers, parsed body, behaviour used).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any

from app.compaction.prompt import ANCHORS_HEADER, IDENTIFIERS_HEADER, PREVIOUS_HEADER, RANGE_HEADER

BEHAVIOURS = frozenset(
    {
        "normal", "slow", "timeout", "500", "503", "429", "garbage", "drop_connection", "refuse",
        "refuse_text", "not_json", "wrong_types", "empty", "truncate", "omit_anchors", "english",
        "minimal", "agent", "recall", "paraphrase", "drop_oldest", "invent_seq", "sloppy",
        "invent_number", "echo_prompt", "invent_fact",
    }
)  # fmt: skip

# What `configure` sets and `reset` restores: the behaviour and every endpoint trait.
TRAITS = (
    "behaviour", "slow_s", "model", "retry_after", "reasoning", "json_schema",
    "response_format", "llama_cpp", "usage", "bare_500_to_json_schema",
)  # fmt: skip

_LINE = re.compile(r"^\[#(\d+) (\w+)(?: ([^\]]*))?\] ?(.*)$")
_KEY = re.compile(r"must|never|always|should|need|don't|prefer|必须|不要|需要|一定|禁止", re.I)
_DECISION = re.compile(r"decided|let's go with|we will use|决定|就用", re.I)
_TODO = re.compile(r"\btodo\b|next step|remember to|待办|记得|下一步", re.I)
_CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Raw:
    """One literal answer for `FakeLLM.script`."""

    status: int
    body: dict[str, Any] | bytes
    headers: dict[str, str] = field(default_factory=dict)


def summary_answer(summary: dict[str, list[str]]) -> Raw:
    """A completion whose content is `summary` as JSON, for `FakeLLM.script`."""
    content = json.dumps(summary)
    return Raw(
        200,
        {
            "id": "chatcmpl-fit",
            "object": "chat.completion",
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 100, "completion_tokens": len(content) // 4},
        },
    )


@dataclass
class RecordedCall:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    behaviour: str


@dataclass
class _Prompt:
    anchors: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    previous: dict[str, Any] = field(default_factory=dict)
    lines: list[tuple[str, str]] = field(default_factory=list)  # (role, text)
    seqs: list[str] = field(default_factory=list)  # the seq of each line


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        header = next((h for h in (ANCHORS_HEADER, IDENTIFIERS_HEADER, PREVIOUS_HEADER,
                                   RANGE_HEADER) if line == h), None)  # fmt: skip
        if header is not None:
            current = out.setdefault(header, [])
        elif current is not None:
            current.append(line)
    return out


def _bullets(lines: list[str]) -> list[str]:
    items: list[str] = []
    for line in lines:
        if line.startswith("- "):
            items.append(line[2:])
        elif line.startswith("    ") and items:
            items[-1] += "\n" + line[4:]
    return items


def parse_prompt(messages: list[dict[str, Any]]) -> _Prompt:
    user = next((m for m in messages if m.get("role") == "user"), {})
    sec = _sections(str(user.get("content") or ""))
    prompt = _Prompt(
        _bullets(sec.get(ANCHORS_HEADER, [])), _bullets(sec.get(IDENTIFIERS_HEADER, []))
    )
    with contextlib.suppress(ValueError):
        prompt.previous = json.loads("\n".join(sec.get(PREVIOUS_HEADER, [])) or "{}")
    for line in sec.get(RANGE_HEADER, []):
        m = _LINE.match(line)
        if m:
            kind = m.group(2) if not m.group(3) else f"{m.group(2)} {m.group(3)}"
            prompt.lines.append((kind, m.group(4)))
            prompt.seqs.append(m.group(1))
        elif line.startswith("    ") and prompt.lines:
            role, text = prompt.lines[-1]
            prompt.lines[-1] = (role, text + "\n" + line[4:])
    return prompt


def _head(text: str, limit: int) -> str:
    """The first `limit` characters, cut where a word ends, as a faithful writer cuts (a
    name cut in two is a name that is not in the log: provenance drops it)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return cut[: cut.rfind(" ")] if " " in cut else cut


def faithful_summary(prompt: _Prompt, max_tokens: int) -> dict[str, list[str]]:
    """Each item from a line of the range cites that line's seq, as the prompt asks."""
    zh = len(_CJK.findall(" ".join(t for _, t in prompt.lines))) > 20
    user_label, asst_label = ("用户：", "助手：") if zh else ("User: ", "Assistant: ")
    out: dict[str, list[str]] = {k: [] for k in ("facts", "decisions", "open_todos",
                                                 "user_prefs", "timeline")}  # fmt: skip
    for key in out:
        prev = prompt.previous.get(key)
        if isinstance(prev, list):
            out[key].extend(str(p) for p in prev)
    out["facts"].extend(prompt.anchors)
    if prompt.identifiers:
        out["facts"].append(("标识：" if zh else "Identifiers: ") + ", ".join(prompt.identifiers))
    for (role, text), seq in zip(prompt.lines, prompt.seqs, strict=True):
        sentences = [s.strip() for s in re.split(r"(?<=[.!?。！？])\s*|\n", text) if s.strip()]
        mark = f" [#{seq}]"
        if role == "user":
            out["timeline"].append(user_label + _head(text, 120) + mark)
            out["user_prefs"].extend(s + mark for s in sentences if _KEY.search(s))
        elif role == "assistant":
            out["timeline"].append(asst_label + _head(text, 80) + mark)
        elif role.endswith("call"):
            out["timeline"].append(_head(text, 80) + mark)
        out["decisions"].extend(s + mark for s in sentences if _DECISION.search(s))
        out["open_todos"].extend(s + mark for s in sentences if _TODO.search(s))
    for key, items in out.items():
        out[key] = list(dict.fromkeys(items))
    # A real model stops at max_tokens; a faithful one writes less instead.
    while len(json.dumps(out, ensure_ascii=False).encode()) // 3 > max_tokens and out["timeline"]:
        out["timeline"].pop(0)
    return out


_CITE = re.compile(r"\s*\[#[\d,\s#-]+\]")
_PATH = re.compile(r"[\w.-]*/[\w./-]+|\b[\w-]+\.(?:py|yaml|yml|json|toml|md|txt|js|ts|sql|cfg)\b")
_NUMBER = re.compile(r"\d+(?:[.,:-]\d+)*")


def _paraphrase(item: str) -> str:
    """Paths and numbers in words, the citation left alone (it is not what is lost)."""
    body = _CITE.sub("", item)
    marks = "".join(_CITE.findall(item))
    return _NUMBER.sub("a few", _PATH.sub("the file", body)) + marks


def _map_items(summary: dict[str, list[str]], fn: Any) -> dict[str, list[str]]:
    return {k: [fn(i) for i in v] for k, v in summary.items()}


_TWO_DIGITS = re.compile(r"(?<![\w.])\d{2,}(?![\w.])")
_SNAKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
INVENTED_FACT = {
    "en": "The deployment to production succeeded on the first try",
    "zh": "部署到生产环境一次就成功了",
}
ECHOES = ("the order of events, one short line each", "user_prefs")


def _invented(prompt: _Prompt, behaviour: str) -> dict[str, list[str]]:
    """What `behaviour` adds to a faithful summary (see the module docstring)."""
    if not prompt.lines:
        return {}
    first = prompt.seqs[0]
    if behaviour == "echo_prompt":
        return {"timeline": [ECHOES[0], f"{ECHOES[0].capitalize()} [#{first}]", ECHOES[1]]}
    if behaviour == "invent_fact":
        zh = len(_CJK.findall(" ".join(t for _, t in prompt.lines))) > 20
        return {"facts": [f"{INVENTED_FACT['zh' if zh else 'en']} [#{first}]"]}
    facts = [f"1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17 [#{first}]"]
    for (_, text), seq in zip(prompt.lines, prompt.seqs, strict=True):
        number = _TWO_DIGITS.search(text)
        if number:
            n = number.group(0)
            facts += [f"{n}.0 [#{seq}]", f"The value is {n}.0 [#{seq}]"]
            break
    for (_, text), seq in zip(prompt.lines, prompt.seqs, strict=True):
        ident = _SNAKE.search(text)
        if ident:
            head, _, tail = ident.group(0).rpartition("_")
            facts.append(f"{(head + tail).capitalize()} [#{seq}]")
            break
    return {"facts": facts}


class FakeLLM:
    def __init__(
        self, *, behaviour: str = "normal", slow_s: float = 0.2, model: str = "fake-summariser"
    ) -> None:
        self.behaviour = behaviour
        self.slow_s = slow_s
        self.model = model
        self.retry_after: str | None = "1"
        self.reasoning = False
        self.json_schema = True
        self.response_format = True
        self.llama_cpp = False
        self.usage = True
        self.bare_500_to_json_schema = False
        self.calls: list[RecordedCall] = []
        self._queue: deque[str | Raw] = deque()
        self._server: asyncio.Server | None = None
        self._closing = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0
        self._made = self._traits()

    def _traits(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in TRAITS}

    def configure(self, **traits: Any) -> FakeLLM:
        """Sets behaviour, slow_s, model and the endpoint traits; `reset` comes back here."""
        unknown = set(traits) - set(TRAITS)
        assert not unknown, f"unknown traits {unknown}"
        for name, value in traits.items():
            setattr(self, name, value)
        self._made = self._traits()
        return self

    def reset(self) -> None:
        """As configured, nothing recorded, nothing scripted: a server shared by several
        tests answers each as a new one would."""
        for name, value in self._made.items():
            setattr(self, name, value)
        self.calls.clear()
        self._queue.clear()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def call_count(self) -> int:
        return len(self.calls)

    def forms(self) -> list[tuple[str, str | None]]:
        """(behaviour, structured-output form) of each call: `json_object+schema` for a
        json_object carrying llama.cpp's `schema` key."""
        out: list[tuple[str, str | None]] = []
        for call in self.calls:
            fmt = call.body.get("response_format") or {}
            form = fmt.get("type")
            out.append((call.behaviour, f"{form}+schema" if "schema" in fmt else form))
        return out

    def script(self, *behaviours: str | Raw) -> None:
        """Behaviours for the next calls, in order; afterwards `behaviour` applies again."""
        unknown = {b for b in behaviours if not isinstance(b, Raw)} - BEHAVIOURS
        assert not unknown, f"unknown behaviours {unknown}"
        self._queue.extend(behaviours)

    async def __aenter__(self) -> FakeLLM:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._closing.set()
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
        stuck = list(self._tasks)
        for task in stuck:
            task.cancel()
        await asyncio.gather(*stuck, return_exceptions=True)
        await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        try:
            while not self._closing.is_set():
                request = await self._read_request(reader)
                if request is None or not await self._answer(request, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self._tasks.discard(task)

    async def _read_request(
        self, reader: asyncio.StreamReader
    ) -> tuple[str, dict[str, str], bytes] | None:
        line = await reader.readline()
        if not line.strip():
            return None
        _, path, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        return path, headers, body

    async def _answer(
        self, request: tuple[str, dict[str, str], bytes], writer: asyncio.StreamWriter
    ) -> bool:
        path, headers, raw = request
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        rejected = self._reject(body)
        if rejected is not None:  # the endpoint's validation runs before any behaviour
            self.calls.append(RecordedCall(path, headers, body, "rejected"))
            return await self._send(writer, 400, rejected)
        refused_500 = self._refuse_500(body)
        if refused_500 is not None:
            self.calls.append(RecordedCall(path, headers, body, "rejected_500"))
            return await self._send(writer, 500, refused_500)
        behaviour = self._queue.popleft() if self._queue else self.behaviour
        if isinstance(behaviour, Raw):
            self.calls.append(RecordedCall(path, headers, body, "raw"))
            return await self._send(writer, behaviour.status, behaviour.body, behaviour.headers)
        self.calls.append(RecordedCall(path, headers, body, behaviour))
        if not path.endswith("/chat/completions"):
            return await self._send(writer, 404, {"error": {"message": "not found"}})
        if behaviour == "429":
            extra = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
            error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit"}
            return await self._send(writer, 429, {"error": error}, extra)
        if behaviour == "503":
            return await self._send(writer, 503, {"error": {"message": "overloaded"}})
        if behaviour == "drop_connection":
            return False
        if behaviour == "timeout":
            await self._closing.wait()
            return False
        if behaviour == "slow":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.slow_s)
        if behaviour == "500":
            return await self._send(writer, 500, {"error": {"message": "upstream exploded"}})
        if behaviour == "garbage":
            return await self._send(writer, 200, b"<html>\x00garbage{{{")
        return await self._send(writer, 200, self._completion(body, behaviour))

    def _reject(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """A 400 body in OpenAI's words for what this endpoint does not accept, or None."""

        def error(message: str, param: str, code: str) -> dict[str, Any]:
            return {"error": {"message": message, "type": "invalid_request_error",
                              "param": param, "code": code}}  # fmt: skip

        if self.reasoning and "max_tokens" in body:
            return error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.", "max_tokens", "unsupported_parameter"
            )  # fmt: skip
        if self.reasoning and body.get("temperature", 1) != 1:
            return error(
                f"Unsupported value: 'temperature' does not support {body['temperature']} with "
                "this model. Only the default (1) value is supported.", "temperature",
                "unsupported_value",
            )  # fmt: skip
        fmt = body.get("response_format")
        if fmt is not None and (
            not self.response_format
            or (not self.json_schema and isinstance(fmt, dict) and fmt.get("type") == "json_schema")
        ):
            kind = fmt.get("type") if isinstance(fmt, dict) else fmt
            return error(
                f"Invalid parameter: 'response_format' of type '{kind}' is not supported with "
                "this model.", "response_format", "invalid_parameter"
            )  # fmt: skip
        return None

    def _refuse_500(self, body: dict[str, Any]) -> dict[str, Any] | bytes | None:
        """The 500 of an endpoint that refuses json_schema that way, or None."""
        fmt = body.get("response_format")
        if not (isinstance(fmt, dict) and fmt.get("type") == "json_schema"):
            return None
        if self.bare_500_to_json_schema:
            return b"Internal Server Error"
        if self.llama_cpp:  # llama-cpp-python's words: its route handler wraps every error
            message = (
                "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                "'json_object'\", 'input': 'json_schema', 'ctx': {'expected': \"'text' or "
                '\'json_object\'"}}\n\n  File "llama_cpp/server/app.py", line 376, in '
                "create_chat_completion\n    POST /v1/chat/completions"
            )
            return {"error": {"message": message, "type": "internal_server_error",
                              "param": None, "code": None}}  # fmt: skip
        return None

    def _completion(self, body: dict[str, Any], behaviour: str) -> dict[str, Any]:
        messages = body.get("messages") or []
        if behaviour == "agent" and body.get("tools"):
            return self._agent_step(body, messages)
        if behaviour == "recall" and body.get("tools"):
            return self._recall_step(body, messages)
        prompt = parse_prompt(messages)
        if behaviour == "drop_oldest":
            half = len(prompt.lines) // 2
            prompt.lines, prompt.seqs = prompt.lines[half:], prompt.seqs[half:]
        summary = faithful_summary(
            prompt, int(body.get("max_tokens") or body.get("max_completion_tokens") or 1024)
        )
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        content = json.dumps(summary, ensure_ascii=False)
        if behaviour == "omit_anchors":
            keys = [a.casefold() for a in prompt.anchors]
            kept = {k: [i for i in v if not any(a in i.casefold() for a in keys)]
                    for k, v in summary.items()}  # fmt: skip
            content = json.dumps(kept, ensure_ascii=False)
        elif behaviour == "paraphrase":
            content = json.dumps(_map_items(summary, _paraphrase), ensure_ascii=False)
        elif behaviour == "invent_seq" and prompt.seqs:
            past, first = int(prompt.seqs[-1]) + 7, prompt.seqs[0]
            counter = iter(range(10_000))

            def invent(item: str) -> str:
                body = _CITE.sub("", item)
                return f"{body} [#{past if next(counter) % 2 == 0 else first}]"

            content = json.dumps(_map_items(summary, invent), ensure_ascii=False)
        elif behaviour in ("invent_number", "echo_prompt", "invent_fact"):
            for key, items in _invented(prompt, behaviour).items():
                summary[key] = [*summary[key], *items]
            content = json.dumps(summary, ensure_ascii=False)
        elif behaviour == "refuse":
            message["refusal"] = "I can't help with that."
        elif behaviour == "refuse_text":
            content = "I'm sorry, but I can't help with summarising this conversation."
        elif behaviour == "not_json":
            content = "Here is a summary: the user and the assistant talked about several things."
        elif behaviour == "wrong_types":
            content = json.dumps({"facts": [True, None], "decisions": False, "timeline": [[]]})
        elif behaviour == "empty":
            content = ""
        elif behaviour == "truncate":
            content, finish = content[: len(content) // 2], "length"
        elif behaviour == "minimal":
            # Vague but true: the head of the first line of the range, cited.
            head = (prompt.lines[0][1][:24] + " [#" + prompt.seqs[0] + "]") if prompt.lines else "-"
            content = json.dumps({"timeline": [head]})
        elif behaviour == "sloppy":
            facts = summary["facts"]
            sloppy = {
                "facts": facts[0] if facts else "nothing",
                "timeline": [{"step": t, "ok": True} for t in summary["timeline"]],
                "decisions": [None, *summary["decisions"]],
            }
            fenced = json.dumps(sloppy, ensure_ascii=False, indent=1)
            content = f"Sure! Here is the summary you asked for:\n```json\n{fenced}\n```\nDone."
        elif behaviour == "english":
            content = json.dumps(
                {"facts": ["The user talked about their plans."], "timeline": ["They talked."]}
            )
        if behaviour != "refuse":
            message["content"] = content
        prompt_chars = sum(len(str(m.get("content") or "")) for m in messages)
        answer = self._envelope(body, message, finish, prompt_chars // 4, len(content) // 4)
        if not self.usage:
            del answer["usage"]
        return answer

    def _envelope(
        self, body: dict[str, Any], message: dict[str, Any], finish: str, prompt: int, done: int
    ) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake-{len(self.calls)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": str(body.get("model") or self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": done,
                "total_tokens": prompt + done,
            },
        }

    def _agent_step(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        last = messages[-1] if messages else {}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if last.get("role") == "tool":
            first_line = str(last.get("content") or "").splitlines()[:1]
            message["content"] = f"Done. The tool said: {first_line[0] if first_line else ''}"
        else:
            tool = body["tools"][0]["function"]["name"]
            words = str(last.get("content") or "").split()
            args = json.dumps({"path": words[-1].strip("?.!") if words else ""})
            call_id = f"call_{len(self.calls)}"
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}
            ]
            finish = "tool_calls"
        return self._envelope(body, message, finish, 0, 0)

    def _recall_step(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        users = [m for m in messages if m.get("role") == "user"]
        words = str(users[-1].get("content") or "").split() if users else []
        query = words[-1].strip("?.!") if words else ""
        last = messages[-1] if messages else {}
        asked = [m for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]
        previous = (
            json.loads(asked[-1]["tool_calls"][0]["function"]["arguments"] or "{}")
            if asked and last.get("role") == "tool"
            else None
        )
        message: dict[str, Any] = {"role": "assistant", "content": None}
        args: dict[str, Any] | None = None
        if previous is None:
            args = {"query": query}
        elif "query" in previous:
            # The first tool output among the hits: a model looking for what a tool said.
            found = re.search(r"seq (\d+) \(tool[^)]*\)(?: line (\d+))?", str(last.get("content")))
            if found:
                args = {"seq": int(found.group(1))}
                if found.group(2):  # a few lines around the match, not the whole output
                    line = int(found.group(2))
                    args.update(line_start=max(1, line - 2), line_end=line + 2)
        if args is None:
            lines = [x for x in str(last.get("content") or "").splitlines() if query in x]
            message["content"] = f"Recalled: {lines[0]}" if lines else "Recalled nothing"
            return self._envelope(body, message, "stop", 0, 0)
        call_id = f"call_{len(self.calls)}"
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "recall", "arguments": json.dumps(args)},
            }
        ]
        return self._envelope(body, message, "tool_calls", 0, 0)

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: dict[str, Any] | bytes,
        headers: dict[str, str] | None = None,
    ) -> bool:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        reason = HTTPStatus(status).phrase
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(data)}\r\nConnection: keep-alive\r\n\r\n"
        )
        writer.write(head.encode() + data)
        await writer.drain()
        return True
