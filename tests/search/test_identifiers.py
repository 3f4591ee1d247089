"""An identifier is found however it is embedded (SPEC §3 "Recall"): inside URLs, paths,
longer tokens and anywhere in a tool output of any length, an exact match above a
prefix match. Over HTTP, against a real server (uvicorn on a free port) and the real
database: app/index/lexemes.py `Term.needle`, app/search/ranking.py.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.search import ranking
from tests.support.messages import call, result, user
from tests.support.ports import free_port
from tests.support.search import append, lint_output, search, seqs


@pytest.fixture(scope="module")
def base_url(database_url: str) -> Iterator[str]:
    import uvicorn

    from app.core.settings import load_settings
    from app.main import create_app

    settings = load_settings(database_url=None, run_compactions_in_process=False)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, database_url=database_url),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
        )
    )
    thread = threading.Thread(target=server.run, name="search-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.fixture
async def http(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as c:
        yield c


def fresh() -> str:
    return f"s-{uuid.uuid4().hex[:12]}"


async def test_a_host_inside_a_url_is_found_beside_the_host_as_a_word(
    http: httpx.AsyncClient,
) -> None:
    sid = fresh()
    await append(
        http,
        sid,
        user("The server is web.chal.csaw.io, see below."),
        {
            "role": "assistant",
            "content": "curl http://web.chal.csaw.io:8000/index.html returned 500",
        },
    )
    found = await search(http, sid, "web.chal.csaw.io")
    assert set(seqs(found)) == {1, 2}, found
    # With its port, as `host:port`: only the URL holds that.
    assert seqs(await search(http, sid, "web.chal.csaw.io:8000")) == [2]
    assert seqs(await search(http, sid, "chal.csaw.io")) in ([1, 2], [2, 1])


@pytest.mark.parametrize("lines", [300, 2500, 5000])
async def test_a_path_in_a_long_tool_output_is_found_whole_and_by_its_tail(
    http: httpx.AsyncClient, lines: int
) -> None:
    """Past PostgreSQL's 256 positions per lexeme (`src`, `py` in every line), with
    2,500 lines past the last position it keeps (16,383), and with 5,000 (over 300,000
    characters) past the 200,000 characters that were all a message's index held."""
    assert lines < 5000 or len(lint_output(lines)) > 300_000
    sid = fresh()
    await append(
        http, sid, call("c1", "lint", '{"target": "src"}'), result("c1", lint_output(lines))
    )
    for q in (
        "src/app/special_handler.py",
        "special_handler.py",
        "special_handler",
        "special_handler.py:12:4",
        "app/special_handler.py:12",
    ):
        found = await search(http, sid, q)
        assert seqs(found) == [2], (q, found)
        hit = found["hits"][0]
        assert hit["line"] == lines + 1 and "special_handler" in hit["snippet"], hit
    # Its parts, each in the output but never in a row, are not the identifier.
    assert seqs(await search(http, sid, "src/app/mod3.py")) == []


async def test_a_path_at_the_end_of_a_megabyte_of_output_is_found(
    http: httpx.AsyncClient,
) -> None:
    """Past the vector's byte budget (a new lexeme per line): the words are kept before
    the identifiers they make up, and the identifier is confirmed against the text."""
    sid = fresh()
    output = lint_output(16_000)
    assert len(output) > 1_000_000
    await append(http, sid, call("c1", "lint", '{"target": "src"}'), result("c1", output))
    for q in ("src/app/special_handler.py", "special_handler.py:12:4"):
        assert seqs(await search(http, sid, q)) == [2], q


@pytest.mark.parametrize(
    ("text", "q"),
    [
        ('File "/srv/src/xarray/core/merge.py", line 88, in merge_core', "xarray/core/merge.py"),
        ("error at path:12:4: unexpected token", "path:12:4"),
        ("const v = window.localStorage.getItem('token');", "localStorage.getItem"),
        ("const v = window.localStorage.getItem('token');", "getItem"),
        ("connect to db.internal.example.com:5432 refused", "db.internal.example.com:5432"),
        ("connect to db.internal.example.com:5432 refused", "db.internal.example.com"),
        ("see https://github.com/pydata/xarray/issues/4412#issuecomment-1", "pydata/xarray"),
        ("id=ORD-2024-0042&state=paid", "ORD-2024-0042"),
    ],
)
async def test_an_identifier_embedded_in_a_longer_token_is_found(
    http: httpx.AsyncClient, text: str, q: str
) -> None:
    sid = fresh()
    await append(
        http, sid, user("unrelated words first"), result_pair(text)[0], result_pair(text)[1]
    )
    found = await search(http, sid, q)
    assert seqs(found) == [3], (q, found)


def result_pair(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return call("c1", "run"), result("c1", text)


async def test_parts_scattered_in_a_message_are_not_the_identifier(
    http: httpx.AsyncClient,
) -> None:
    sid = fresh()
    await append(
        http,
        sid,
        user("the web team, the chal docs, csaw rules and io ports"),  # every part, apart
        user("webchal.csaw.io is another host"),  # a longer token that ends like it
    )
    assert seqs(await search(http, sid, "web.chal.csaw.io")) == []
    assert seqs(await search(http, sid, "chal.csaw.io")) == []


async def test_an_exact_match_ranks_above_a_prefix_match(http: httpx.AsyncClient) -> None:
    sid = fresh()
    await append(
        http,
        sid,
        user("ticket 00017 is the broken one"),  # 1
        user("ticket 000170 is fine"),  # 2, newer
        user("build RX-12 failed"),  # 3
        user("build RX-1200 passed, and RX-1201"),  # 4, newer
    )
    assert seqs(await search(http, sid, "00017")) == [1, 2]
    # An identifier of several parts matches whole parts only: `RX-12` is not the start
    # of `RX-1200` (as `special_handler` is not of `special_handlers`).
    assert seqs(await search(http, sid, "RX-12")) == [3]


async def test_chinese_text_is_found_as_before(http: httpx.AsyncClient) -> None:
    sid = fresh()
    await append(
        http,
        sid,
        user("数据库连接失败了，请检查配置文件 config/db.yaml。"),
        user("好的，我来检查 config/db.yaml 里数据库的配置。"),
    )
    assert seqs(await search(http, sid, "连接失败")) == [1]
    assert set(seqs(await search(http, sid, "数据库"))) == {1, 2}
    assert set(seqs(await search(http, sid, "db.yaml"))) == {1, 2}


async def test_a_chinese_word_past_the_positions_kept_is_found(http: httpx.AsyncClient) -> None:
    """A long Chinese tool output: past position 16,383 every pair of characters has that
    one position, so the phrase of a word's pairs cannot hold there; the pairs found
    apart are confirmed against the text."""
    sid = fresh()
    log = "".join(f"日志第{i}行：一切正常。\n" for i in range(3000)) + "数据库连接失败了。ア・イ"
    await append(
        http,
        sid,
        call("c1", "read_log", '{"path": "logs/app.log"}'),
        result("c1", log),
        user("连接没有问题，失败的是别的。"),
    )
    assert seqs(await search(http, sid, "连接失败")) == [2]
    assert seqs(await search(http, sid, "数据库连接"))[:1] == [2]
    # Its pairs in a short message, apart, are not the word.
    assert 3 not in seqs(await search(http, sid, "连接失败"))
    # Punctuation inside a run (katakana's middle dot) is plain text in the confirmation.
    assert seqs(await search(http, sid, "ア・イ")) == [2]


async def test_a_code_in_a_script_the_model_wrote_is_found(http: httpx.AsyncClient) -> None:
    """Tool-call arguments are JSON: a script's new lines are `\\n` there, and indexed
    as written they joined the words around them (`import os\\nos.makedirs`)."""
    sid = fresh()
    script = "import os\nimport sys\n\nos.makedirs('.a', exist_ok=True)\nsys.path.insert(0, 'src')"
    await append(
        http,
        sid,
        user("Make the directories, then run it."),
        call("c1", "bash", json.dumps({"command": f"cat <<'EOF' > walk.py\n{script}\nEOF"})),
        result("c1", ""),
        user("What about os and sys? And makedirs, and path, and insert?"),
    )
    for q in ("os.makedirs", "sys.path.insert", "walk.py"):
        assert seqs(await search(http, sid, q))[:1] == [2], q


async def test_a_code_in_capitals_ranks_its_holders_as_written_first(
    http: httpx.AsyncClient,
) -> None:
    """`STDOUT` searched for: the messages holding it so above those holding `stdout`."""
    sid = fresh()
    await append(
        http,
        sid,
        user("The env var is STDOUT, set it to a file."),
        {"role": "assistant", "content": "The stdout of the run is empty."},
        {"role": "assistant", "content": "Captured stdout: nothing."},
        {"role": "assistant", "content": "stdout again, and more stdout."},
    )
    assert seqs(await search(http, sid, "STDOUT", limit=3))[:1] == [1]


@pytest.fixture
def long_session_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """As tests/search/test_long_sessions.py: a hundred messages take a long session's paths
    (sample, recent window, index, further back). The server runs in this process."""
    monkeypatch.setattr(ranking, "SAMPLE", 10)
    monkeypatch.setattr(ranking, "COMMON", 4)
    monkeypatch.setattr(ranking, "SURELY_COMMON", 8)
    monkeypatch.setattr(ranking, "WINDOW", 20)
    monkeypatch.setattr(ranking, "FURTHER", 40)


@pytest.mark.usefixtures("long_session_thresholds")
async def test_in_a_long_session_every_holder_is_found_common_or_rare(
    http: httpx.AsyncClient,
) -> None:
    sid = fresh()
    old = "curl -s http://web.chal.csaw.io:8000/flag.txt -> 403"
    await append(http, sid, call("c1", "bash"), result("c1", old))  # 1, 2
    await append(http, sid, *[user(f"plain step {i} on web and io") for i in range(60)])
    # Rare in the session: the one old output holding it inside a URL is found.
    assert seqs(await search(http, sid, "web.chal.csaw.io")) == [2]
    assert seqs(await search(http, sid, "what did curl say about web.chal.csaw.io?"))[0] == 2
    # Common in the recent window: those first, newest first.
    await append(http, sid, *[user(f"retry {i}: web.chal.csaw.io is down") for i in range(12)])
    found = seqs(await search(http, sid, "web.chal.csaw.io", limit=20))
    assert found[:12] == list(range(74, 62, -1)), found
    # As a token of its own above inside a URL, whatever their age.
    await append(http, sid, user("fetch http://web.chal.csaw.io/robots.txt"))  # 75
    found = seqs(await search(http, sid, "web.chal.csaw.io", limit=20))
    assert found[:12] == list(range(74, 62, -1)) and found[12] == 75, found


async def test_a_windows_path_past_the_positions_kept_is_found_in_output_and_arguments(
    http: httpx.AsyncClient,
) -> None:
    """Backslashes, which the stored JSON doubles (and doubles again inside a tool call's
    arguments), in a text whose parts' positions PostgreSQL no longer keeps."""
    lines = [f"C:\\src\\pkg\\mod{i}.py:{i}: W0001 unused" for i in range(300)]
    output = "\n".join([*lines, "C:\\src\\app\\special_handler.py:12: E1101 no member"])
    paths = [f"C:\\src\\pkg\\mod{i}.py" for i in range(300)] + ["C:\\src\\app\\other_one.py"]
    args = json.dumps({"paths": paths})
    sid = fresh()
    await append(http, sid, call("c1", "lint", args), result("c1", output))
    assert seqs(await search(http, sid, "app\\special_handler.py")) == [2]
    assert seqs(await search(http, sid, "src\\app\\other_one.py")) == [1]
    assert seqs(await search(http, sid, "app\\mod3.py")) == []
