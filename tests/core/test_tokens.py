"""app.core.tokens: offline encodings, chat accounting, the estimate, model tables."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public

from app.core.tokens import (
    REPLY_PRIMING,
    encodings,
    get_counter,
    known_context_limit,
    tokenizer_for_model,
)
from app.core.tokens.counter import (
    IMAGE_DEFAULT_TOKENS,
    IMAGE_LOW_DETAIL_TOKENS,
    TOOL_CALL_OVERHEAD,
    _Counter,
    estimate_tokens,
)
from tests.support.dataset import DATASET

O200K = get_counter("gpt-4o")
CL100K = get_counter("gpt-4")
ESTIMATE = get_counter("claude-3-5-sonnet")


@pytest.fixture
def fresh_encodings() -> Iterator[None]:
    encodings._build.cache_clear()
    yield
    encodings._build.cache_clear()


# --- encodings ----------------------------------------------------------------


def test_token_ids_match_tiktoken() -> None:
    # Ids computed once with tiktoken's own downloaded files.
    assert encodings.get_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert encodings.get_encoding("cl100k_base").encode("hello world") == [15339, 1917]
    assert encodings.get_encoding("o200k_base").encode("你好，世界") == [177519, 979, 28428]
    assert encodings.get_encoding("cl100k_base").encode("你好，世界") == [
        57668,
        53901,
        3922,
        3574,
        244,
        98220,
    ]


def test_encodings_load_without_network_or_cache(
    fresh_encodings: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(blobpath: str) -> bytes:
        raise AssertionError(f"tried to fetch {blobpath}")

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.load, "read_file", no_network)
    for name in encodings.ENCODING_NAMES:
        encoding = encodings.get_encoding(name)
        assert encoding.name == name
        assert encoding.decode(encoding.encode("hello world")) == "hello world"
    assert list(tmp_path.iterdir()) == []
    assert encodings.get_encoding("o200k_base").special_tokens_set >= {"<|endoftext|>"}


def test_hash_mismatch_is_a_clear_error(
    fresh_encodings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(encodings, "bundled_rank_bytes", lambda name: b"aGVsbG8= 0\n")
    with pytest.raises(encodings.EncodingUnavailableError, match="sha256"):
        encodings.get_encoding("cl100k_base")
    # tiktoken's own loader is put back even when ours fails.
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe


def test_concurrent_first_use_builds_one_encoding(fresh_encodings: None) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        built = list(pool.map(lambda _: encodings.get_encoding("o200k_base"), range(8)))
    assert all(encoding is built[0] for encoding in built)


# --- text -----------------------------------------------------------------------


def test_count_text_exact() -> None:
    assert O200K.count_text("hello world") == 2
    assert CL100K.count_text("hello world") == 2
    assert O200K.count_text("") == 0


@pytest.mark.parametrize("counter", [O200K, CL100K, ESTIMATE], ids=lambda c: c.name)
def test_special_token_text_is_ordinary_text(counter: Any) -> None:
    assert counter.count_text("<|endoftext|>") > 1
    message = {"role": "user", "content": "before <|endoftext|><|endofprompt|> after"}
    assert counter.count_message(message) > 3


@pytest.mark.parametrize("counter", [O200K, ESTIMATE], ids=lambda c: c.name)
def test_lone_surrogates_do_not_raise(counter: Any) -> None:
    # json.loads accepts "\ud800", so clients can send it.
    assert counter.count_text("x\ud800y") >= 1


# --- messages -------------------------------------------------------------------


def test_message_overhead_follows_the_cookbook() -> None:
    message = {"role": "user", "content": "hello world"}
    assert O200K.count_message(message) == 3 + 1 + 2
    assert O200K.count_messages([message]) == 3 + 1 + 2 + REPLY_PRIMING
    assert O200K.count_messages([]) == REPLY_PRIMING


@pytest.mark.parametrize("counter", [O200K, CL100K, ESTIMATE], ids=lambda c: c.name)
def test_name_costs_one_more_than_its_text(counter: Any) -> None:
    plain = {"role": "user", "content": "hi"}
    named = {**plain, "name": "alice"}
    assert counter.count_message(named) == (
        counter.count_message(plain) + counter.count_text("alice") + 1
    )


def test_null_content_and_text_parts() -> None:
    assert O200K.count_message({"role": "assistant", "content": None}) == 3 + 1
    as_string = {"role": "user", "content": "hello world"}
    as_parts = {"role": "user", "content": [{"type": "text", "text": "hello world"}]}
    assert O200K.count_message(as_parts) == O200K.count_message(as_string)
    two_parts = {
        "role": "user",
        "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": " world"}],
    }
    assert O200K.count_message(two_parts) == 3 + 1 + 1 + 1


def test_image_and_unknown_parts() -> None:
    def image(detail: str | None) -> dict[str, Any]:
        url: dict[str, Any] = {"url": "https://example.com/cat.png"}
        if detail:
            url["detail"] = detail
        return {"role": "user", "content": [{"type": "image_url", "image_url": url}]}

    assert O200K.count_message(image("low")) == 3 + 1 + IMAGE_LOW_DETAIL_TOKENS
    assert O200K.count_message(image("high")) == 3 + 1 + IMAGE_DEFAULT_TOKENS
    assert O200K.count_message(image(None)) == 3 + 1 + IMAGE_DEFAULT_TOKENS
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    assert O200K.count_message({"role": "user", "content": [audio]}) > 3 + 1 + 5


def _assistant_call(arguments: str, calls: int = 1) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
            for i in range(calls)
        ],
    }


@pytest.mark.parametrize("counter", [O200K, CL100K, ESTIMATE], ids=lambda c: c.name)
def test_tool_calls_count_name_arguments_and_overhead(counter: Any) -> None:
    empty = counter.count_message(_assistant_call("{}"))
    assert empty == (
        3
        + counter.count_text("assistant")
        + TOOL_CALL_OVERHEAD
        + counter.count_text("get_weather")
        + counter.count_text("{}")
    )
    bigger = counter.count_message(_assistant_call('{"city": "Paris", "unit": "celsius"}'))
    assert bigger > empty
    assert counter.count_message(_assistant_call("{}", calls=2)) > empty


def test_tool_call_id_and_unknown_fields_count() -> None:
    bare = {"role": "tool", "content": "42"}
    answered = {**bare, "tool_call_id": "call_abc123"}
    assert O200K.count_message(answered) == (
        O200K.count_message(bare) + O200K.count_text("call_abc123")
    )
    extra = {**bare, "reasoning_content": "let me think", "audio": {"id": "audio_1"}}
    assert O200K.count_message(extra) == (
        O200K.count_message(bare)
        + O200K.count_text("let me think")
        + O200K.count_text('{"id":"audio_1"}')
    )


def test_big_text_is_encoded_once() -> None:
    calls: list[int] = []

    def spy(text: str) -> int:
        calls.append(len(text))
        return len(text)

    counter = _Counter("o200k_base", spy, 7)
    calls.clear()  # the counter looks up its role strings once, up front
    big = "x" * 100_000
    counter.count_message({"role": "tool", "tool_call_id": "call_1", "content": big})
    assert calls.count(100_000) == 1
    assert len(calls) == 2  # the content and the short id; the role is a lookup


# --- tools ----------------------------------------------------------------------


def _tool(name: str, properties: dict[str, Any] | None = None, doc: str = "") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": doc,
            "parameters": {"type": "object", "properties": properties or {}},
        },
    }


@pytest.mark.parametrize("counter", [O200K, CL100K, ESTIMATE], ids=lambda c: c.name)
def test_tools_are_monotonic(counter: Any) -> None:
    city = {"type": "string", "description": "City name"}
    unit = {"type": "string", "description": "Unit", "enum": ["celsius"]}
    units = {**unit, "enum": ["celsius", "kelvin"]}
    doc = "Weather now."
    steps: list[list[dict[str, Any]]] = [
        [],
        [_tool("get_weather")],
        [_tool("get_weather", doc=doc)],
        [_tool("get_weather", {"city": city}, doc)],
        [_tool("get_weather", {"city": city, "unit": unit}, doc)],
        [_tool("get_weather", {"city": city, "unit": units}, doc)],
        [_tool("get_weather", {"city": city, "unit": units}, doc), _tool("get_time")],
    ]
    counts = [counter.count_tools(tools) for tools in steps]
    assert counts[0] == 0
    assert all(a < b for a, b in itertools.pairwise(counts)), counts
    assert counter.count_tools(steps[-1]) == counts[-1]  # deterministic


def test_tool_schema_keywords_beyond_the_cookbook_count() -> None:
    nested = {
        "type": "object",
        "description": "Where",
        "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
    }
    flat = _tool("locate", {"where": {"type": "object", "description": "Where"}})
    deep = _tool("locate", {"where": nested})
    assert O200K.count_tools([deep]) > O200K.count_tools([flat])
    with_default = _tool("f", {"n": {"type": "integer", "description": "N", "default": 3}})
    without = _tool("f", {"n": {"type": "integer", "description": "N"}})
    assert O200K.count_tools([with_default]) > O200K.count_tools([without])


def test_tools_in_other_shapes_count() -> None:
    responses_style = {"type": "function", "name": "get_time", "description": "Now"}
    builtin = {"type": "web_search_preview"}
    assert O200K.count_tools([responses_style]) > 12
    assert O200K.count_tools([builtin]) > 12


# --- estimate -------------------------------------------------------------------


def test_estimate_counts_cjk_per_character() -> None:
    text = "我们明天下午三点在会议室讨论项目进度，请准时参加。"
    exact = O200K.count_text(text)
    assert estimate_tokens(text) >= exact
    assert estimate_tokens(text) <= 1.5 * exact
    assert len(text) / 4 < 0.5 * exact  # what chars/4 would have said


def _sessions() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with DATASET.open(encoding="utf-8") as lines:
        for line in lines:
            session = json.loads(line)
            yield session["meta"]["lang"], session["messages"]


@pytest.mark.skipif(not DATASET.exists(), reason=f"{DATASET} not present")
def test_estimate_is_honest_on_the_dataset() -> None:
    # Measured: estimate/o200k = 1.11 (zh) and 1.12 (en) in aggregate, every
    # session within [0.99, 1.23]. Plain chars/4 gives 0.46 on zh.
    exact: dict[str, int] = {}
    estimate: dict[str, int] = {}
    for lang, messages in _sessions():
        e, x = ESTIMATE.count_messages(messages), O200K.count_messages(messages)
        assert 0.95 <= e / x <= 1.30, (lang, e, x)
        exact[lang] = exact.get(lang, 0) + x
        estimate[lang] = estimate.get(lang, 0) + e
    assert set(exact) == {"zh", "en"}
    for lang in exact:
        assert 1.0 <= estimate[lang] / exact[lang] <= 1.2, (lang, estimate[lang], exact[lang])


# --- models ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tokenizer"),
    [
        (None, "o200k_base"),
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-oss-120b", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:acme::abc123", "o200k_base"),
        ("GPT-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("text-embedding-ada-002", "cl100k_base"),
        ("davinci-002", "cl100k_base"),
        ("text-davinci-003", "estimate"),
        ("claude-3-5-sonnet", "estimate"),
        ("llama-3", "estimate"),
        ("o10-experimental", "estimate"),
        ("openai/openrouter-llama-4-maverick", "estimate"),
    ],
)
def test_tokenizer_for_model(model: str | None, tokenizer: str) -> None:
    assert tokenizer_for_model(model) == tokenizer
    counter = get_counter(model)
    assert counter.name == tokenizer
    assert counter.mode == ("estimate" if tokenizer == "estimate" else "exact")


def test_counters_are_shared_per_tokenizer() -> None:
    assert get_counter(None) is get_counter("gpt-4o") is get_counter("o3")
    assert get_counter("claude-3-opus") is get_counter("llama-3")


@pytest.mark.parametrize(
    ("model", "limit"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-32k", 32_768),
        ("gpt-3.5-turbo", 16_385),
        ("o1", 200_000),
        ("o1-mini", 128_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-nano", 400_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-sonnet-4-20250514", 200_000),
        ("claude-opus-4-1", 200_000),
        ("anthropic/claude-3-opus", 200_000),
        ("llama-3.1-8b-instruct", 131_072),
        ("llama-3-8b", 8_192),
        ("mystery-model", None),
        (None, None),
    ],
)
def test_known_context_limit(model: str | None, limit: int | None) -> None:
    assert known_context_limit(model) == limit
