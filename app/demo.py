"""`contextd demo`: the example agent (examples/agent_loop.py) against contextd and a
local scripted model, so it runs with no API key and no network.

The scripted model speaks OpenAI's Chat Completions over HTTP (what the agent's
`openai` SDK sends) and plays a tool-using agent: after a user message it calls
the first tool offered with `{"path": <the message's last word>}`; after a tool
result it answers with the result's first line (under a preview's header when the
result was long). It reads what contextd assembled, so the demo shows the real loop:
append, fit, call, append.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from app.core.settings import Settings

DEFAULT_QUESTION = "How many lines are in pyproject.toml?"


def scripted_reply(body: dict[str, Any], number: int) -> dict[str, Any]:
    """One chat completion for a request `body` (the agent step described above)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    tools = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": None}
    if last.get("role") == "tool" or not tools:
        # A long result reaches the model as contextd's preview: its header, then the head.
        lines = str(last.get("content") or "").splitlines()
        first = [x for x in lines if not x.startswith("[tool output preview:")][:1]
        message["content"] = f"The tool said: {first[0] if first else '(nothing)'}"
        finish = "stop"
    else:
        words = str(last.get("content") or "").split()
        args = json.dumps({"path": words[-1].strip("?.!,") if words else ""})
        name = tools[0]["function"]["name"]
        message["tool_calls"] = [
            {
                "id": f"call_{number}",
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
        ]
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


class ScriptedModel:
    """The scripted model on 127.0.0.1, in a thread: `with ScriptedModel() as m: m.base_url`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                model.requests.append(body)
                self._send(200, scripted_reply(body, len(model.requests)))

            def _send(self, status: int, content: dict[str, Any]) -> None:
                data = json.dumps(content).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Service:
    """contextd itself, on a free loopback port, in a thread of this process."""

    def __init__(self, settings: Settings, url: str) -> None:
        import uvicorn

        from app.main import create_app

        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(settings, database_url=url),
            host="127.0.0.1",
            port=self.port,
            log_config=None,
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        # Off the main thread uvicorn installs no signal handlers: Ctrl-C stays ours.
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> _Service:
        self._thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self._thread.is_alive():
            try:
                if httpx.get(self.base_url + "/readyz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("contextd did not become ready")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(30)


def find_example(start: Path | None = None) -> Path | None:
    """examples/agent_loop.py of the checkout this runs in (it is not in the wheel)."""
    here = Path(__file__).resolve().parents[1]
    for root in (start or Path.cwd(), here):
        candidate = root / "examples" / "agent_loop.py"
        if candidate.is_file():
            return candidate
    return None


def _demo_key(settings: Settings) -> str | None:
    """The key the demo's agent sends: the caller's `CONTEXTD_API_KEY`, else the first of
    `CONTEXTD_API_KEYS` (`key:tenant,...`); None when neither names one."""
    given = os.environ.get("CONTEXTD_API_KEY", "").strip()
    if given:
        return given
    from app.auth.keys import env_keys

    keys = env_keys(settings.api_keys.get_secret_value()) if settings.api_keys else []
    return keys[0][0] if keys else None


def run_demo(settings: Settings, url: str, question: str = DEFAULT_QUESTION) -> int:
    example = find_example()
    if example is None:
        print("contextd demo: examples/agent_loop.py not found; run it from a checkout")
        return 2
    key = _demo_key(settings)
    if key is None:
        from app.auth.cli import keys_configured

        if keys_configured(settings, url):
            print(
                "contextd demo: this database has API keys: give the demo one in CONTEXTD_API_KEY",
                file=sys.stderr,
            )
            return 2
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    session = f"demo-{uuid.uuid4().hex[:8]}"
    with ScriptedModel() as model, _Service(settings, url) as service:
        print(f"contextd on {service.base_url}, scripted model on {model.base_url}")
        print(f"agent: {question}  (session {session})")
        env = {
            **os.environ,
            "CONTEXTD_URL": service.base_url,
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "no-key-needed",  # the scripted model reads none
            "MODEL": "gpt-4o-mini",  # names the tokenizer contextd counts with
        }
        env.pop("CONTEXTD_API_KEY", None)
        if key:
            env["CONTEXTD_API_KEY"] = key
        done = subprocess.run(
            [sys.executable, str(example), "--session", session, question],
            env=env,
            cwd=example.parent.parent,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        print(f"answer: {done.stdout.strip()}")
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return done.returncode
        log = httpx.get(
            f"{service.base_url}/sessions/{session}/messages", headers=headers, timeout=30
        ).json()
        print(f"the model was called {len(model.requests)} times; contextd's log of {session}:")
        for m in log["messages"]:
            text = m.get("content") or json.dumps(m.get("tool_calls"))
            print(f"  seq {m['seq']} {m['role']:<9} {str(text).splitlines()[0][:70]}")
        budget = httpx.get(
            f"{service.base_url}/sessions/{session}/budget", headers=headers, timeout=30
        ).json()
        print(
            f"budget: {budget['status']}, {budget['current_tokens']} of "
            f"{budget['usable_budget']} usable tokens"
        )
    return 0
