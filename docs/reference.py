"""Writes docs/reference.md from the code: every route of the OpenAPI description
(parameters with their bounds, body models, answers) and every setting of
`app/core/settings.py` (variable, type, default, bounds). `make docs` runs it;
tests/test_docs.py fails when the committed file is not what this writes.

    python docs/reference.py          # rewrite docs/reference.md
    python docs/reference.py --check  # exit 1 when it is stale
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

OUT = Path(__file__).resolve().parent / "reference.md"

# What each setting is for, in a line. The generator refuses a setting missing here,
# so a new one cannot reach the reference without its meaning.
MEANINGS: dict[str, str] = {
    "CONTEXTD_DATABASE_URL": "any PostgreSQL (`postgresql://…`); unset: the embedded PostgreSQL",
    "CONTEXTD_DATA_DIR": "where the embedded PostgreSQL keeps its data",
    "CONTEXTD_HOST": "bind address (loopback only while no API key is configured)",
    "CONTEXTD_PORT": "port of `contextd serve`",
    "CONTEXTD_LOG_FORMAT": "`json`, `console`, or `auto` (console on a terminal)",
    "CONTEXTD_LOG_LEVEL": "log level",
    "CONTEXTD_DEFAULT_MODEL": "model (and so tokenizer) of sessions that name none",
    "CONTEXTD_LLM_BASE_URL": "OpenAI-compatible endpoint for summaries; unset: extractive summaries",
    "CONTEXTD_LLM_MODEL": "model asked for summaries",
    "CONTEXTD_LLM_API_KEY": "key of that endpoint",
    "CONTEXTD_LLM_MAX_RETRIES": "retries of a 429/5xx/dropped summary call, within `compact_timeout_s`",
    "CONTEXTD_LLM_REASONING": "`true`: `max_completion_tokens`, no temperature; `auto`: by name, then learnt from a 400",
    "CONTEXTD_LLM_JSON_MODE": "structured output asked for; `auto` steps down as the endpoint refuses",
    "CONTEXTD_API_KEYS": "`key:tenant,key:tenant`; with any key, every route but the probes needs one",
    "CONTEXTD_MAX_BODY_BYTES": "larger request bodies get 413",
    "CONTEXTD_MAX_MESSAGES_PER_APPEND": "more messages in one append get 422",
    "CONTEXTD_MAX_MESSAGE_BYTES": "a larger message gets 413 naming it",
    "CONTEXTD_MAX_PAGE_SIZE": "largest `limit` of any listing",
    "CONTEXTD_TOOL_PREVIEW_TOKENS": "the smallest preview limit: a payload sends as previews the tool outputs over the larger of this and 1/16 of its input budget",
    "CONTEXTD_TRIM_TARGET_RATIO": "a payload that must trim is cut to this share of its budget (prompt-cache stability)",
    "CONTEXTD_APPEND_GROUP_SIZE": "group commit: appends of different sessions sharing one transaction; 1 turns it off",
    "CONTEXTD_DB_POOL_SIZE": "pooled connections of the whole server (shared out across `--workers`)",
    "CONTEXTD_DB_POOL_TIMEOUT_S": "wait for a pooled connection before a 503",
    "CONTEXTD_DATABASE_WAIT_S": "`serve` and `worker` wait this long for a database not up yet (0: none)",
    "CONTEXTD_RUN_COMPACTIONS_IN_PROCESS": "`auto`: the server runs jobs unless a `contextd worker` is alive",
    "CONTEXTD_JOB_LEASE_S": "a dead runner's job is taken over this long after its last renewal",
    "CONTEXTD_COMPACTION_WORKERS": "concurrent compaction jobs per server (shared out across `--workers`)",
    "CONTEXTD_COMPACTION_TENANT_MAX_RUNNING": "running jobs one tenant may hold across all processes",
    "CONTEXTD_WORKER_PORT": "`contextd worker`'s `/healthz`, `/readyz` and `/metrics`",
    "COMPACTION_CONTEXT_LIMIT": "context window when neither the session nor the model names one",
    "COMPACTION_RESERVED_OUTPUT_TOKENS": "kept free for the model's reply",
    "COMPACTION_SAFETY_MARGIN_TOKENS": "kept free for counting error",
    "COMPACTION_WARN_RATIO": "budget status `warn` from this share of the usable budget",
    "COMPACTION_COMPACT_RATIO": "budget status `compact_needed` from this share (`0 < warn < compact < 1`)",
    "COMPACTION_MIN_PRESERVED_TURNS": "turns before the current one kept out of a compaction (within `keep_recent_ratio`)",
    "COMPACTION_KEEP_RECENT_RATIO": "the preserved tail is at most this share of the usable budget, in whole steps",
    "COMPACTION_MIN_PRESERVED_STEPS": "the current turn's last complete steps never compacted, whatever their size",
    "COMPACTION_USER_MESSAGES_RATIO": "the summary's verbatim `user_messages` section is at most this share",
    "COMPACTION_ARTIFACTS_RATIO": "the summary's verbatim `artifacts` section (files, commands, values tools returned) is at most this share of the usable budget, newest kept first; 0 leaves it out",
    "COMPACTION_COMPACT_TIMEOUT_S": "per summary model call",
    "COMPACTION_FLUSH_TIMEOUT_S": "a memory flush taking longer is skipped (`flush_skipped: true`)",
    "COMPACTION_FAIL_OPEN": "`false`: payloads answer 409 `compaction_failed` while the last compaction failed",
    "COMPACTION_MAX_FLUSH_CANDIDATES": "memory-flush candidates kept per compaction",
    "COMPACTION_MAX_CANDIDATE_TEXT_BYTES": "size of one candidate's text",
    "COMPACTION_MAX_COMPACTIONS_PER_REQUEST": "automatic compactions chained while still over the threshold",
    "COMPACTION_SUMMARY_TEMPERATURE": "temperature of summary calls, in [0, 1]",
    "COMPACTION_ANCHOR_RETRY_ENABLED": "retry once naming the anchors a summary lost",
    "COMPACTION_MIN_FREE_RATIO": "skip (`noop`) a compaction freeing less than this share of the usable budget",
    "COMPACTION_REGROWTH_RATIO": "no new automatic compaction until the history has grown by this share",
}

_METHODS = ("get", "put", "post", "delete", "patch")


def render() -> str:
    """The reference for the code's defaults, whatever this environment sets."""
    import os

    saved = {k: v for k, v in os.environ.items() if k.startswith(("CONTEXTD_", "COMPACTION_"))}
    for k in saved:
        del os.environ[k]
    try:
        return "\n".join([*_header(), *_api(), *_settings()]).rstrip() + "\n"
    finally:
        os.environ.update(saved)


def _header() -> list[str]:
    return [
        "# Reference",
        "",
        "Generated by `python docs/reference.py` (`make docs`) from the OpenAPI description",
        "and `app/core/settings.py`; `tests/test_docs.py` fails when this file is stale. Do not edit",
        "it by hand. The running server serves the same description at `/openapi.json`, browsable",
        "at `/docs` (Swagger UI) and `/redoc`. What the fields mean is in [spec.md](spec.md) and",
        "the [guide](guide.md).",
        "",
    ]


def _api() -> list[str]:
    from app.core.settings import load_settings
    from app.main import create_app

    spec = create_app(load_settings()).openapi()
    lines = ["## HTTP API", ""]
    for path, operations in spec["paths"].items():
        for method in _METHODS:
            op = operations.get(method)
            if op is None:
                continue
            lines += [f"### `{method.upper()} {path}`", ""]
            summary = (op.get("description") or op.get("summary") or "").strip()
            if summary:
                lines += [summary.split("\n\n")[0].replace("\n", " "), ""]
            params = op.get("parameters") or []
            if params:
                lines += ["| parameter | in | type and bounds | required |", "|---|---|---|---|"]
                for p in params:
                    kind = _schema_text(p.get("schema") or {})
                    lines.append(
                        f"| `{p['name']}` | {p['in']} | {kind} | {'yes' if p.get('required') else 'no'} |"
                    )
                lines.append("")
            body = op.get("requestBody")
            if body:
                lines += [f"Body: {_schema_text(_first_schema(body))}", ""]
            answers = []
            for status, answer in sorted(op.get("responses", {}).items()):
                schema = _first_schema(answer)
                model = _schema_text(schema) if schema else ""
                answers.append(f"{status}" + (f" {model}" if model and model != "object" else ""))
            lines += ["Answers: " + ", ".join(answers), ""]
    return lines


def _first_schema(part: dict[str, Any]) -> dict[str, Any]:
    """The schema of a body's or an answer's first media type ({} when it has none)."""
    for media in (part.get("content") or {}).values():
        schema: dict[str, Any] = media.get("schema") or {}
        return schema
    return {}


def _schema_text(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return f"`{schema['$ref'].rsplit('/', 1)[-1]}`"
    if "anyOf" in schema:
        kinds = [_schema_text(s) for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(kinds) + (" or null" if len(kinds) < len(schema["anyOf"]) else "")
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    kind = str(schema.get("type", "object"))
    bounds = []
    for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"),
                      ("exclusiveMaximum", "<"), ("minLength", "length ≥"), ("maxLength", "length ≤")):  # fmt: skip
        if key in schema:
            bounds.append(
                f"{sign} {schema[key]:,}"
                if isinstance(schema[key], int)
                else f"{sign} {schema[key]}"
            )
    if "pattern" in schema:
        bounds.append(f"pattern `{_cell(schema['pattern'])}`")
    if "default" in schema and schema["default"] is not None:
        bounds.append(f"default `{schema['default']}`")
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _settings() -> list[str]:
    from app.core.settings import CompactionSettings, Settings

    lines = [
        "## Settings",
        "",
        "Environment variables, read and validated when a process starts: a bad value stops it",
        "with a line naming the variable. `COMPACTION_*` values are defaults a session may",
        "override (`PUT /sessions/{id}` with `compaction: {<name in lower case>: value}`).",
        "",
        "| variable | type | default | bounds | meaning |",
        "|---|---|---|---|---|",
    ]
    for cls, prefix in ((Settings, "CONTEXTD_"), (CompactionSettings, "COMPACTION_")):
        for name, field in _fields(cls):
            var = prefix + name.upper()
            if var not in MEANINGS:
                raise SystemExit(f"docs/reference.py: add {var} to MEANINGS")
            lines.append(
                f"| `{var}` | {_type_text(field)} | {_default_text(field)} | {_bounds_text(field)} | {MEANINGS[var]} |"
            )
    unknown = set(MEANINGS) - {
        p + n.upper()
        for cls, p in ((Settings, "CONTEXTD_"), (CompactionSettings, "COMPACTION_"))
        for n, _ in _fields(cls)
    }
    if unknown:
        raise SystemExit(f"docs/reference.py: no such settings: {sorted(unknown)}")
    return [*lines, ""]


def _fields(cls: type[BaseSettings]) -> list[tuple[str, FieldInfo]]:
    return [(n, f) for n, f in cls.model_fields.items() if n != "compaction"]


def _type_text(field: FieldInfo) -> str:
    text = str(field.annotation).replace("typing.", "").replace("pathlib.", "")
    for noise in ("<class '", "'>", "pydantic.types."):
        text = text.replace(noise, "")
    return text.replace("|", "\\|")


def _default_text(field: FieldInfo) -> str:
    default = field.get_default(call_default_factory=False)
    if default is None:
        return "unset"
    if isinstance(default, int) and not isinstance(default, bool) and default >= 10_000:
        return f"{default:,}"
    return f"`{default}`"


def _bounds_text(field: FieldInfo) -> str:
    out = []
    for meta in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"), ("pattern", "")):
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}".strip() if attr != "pattern" else f"`{_cell(value)}`")
    return ", ".join(out)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a bare `|` would end the cell."""
    return text.replace("|", "\\|")


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.is_file() or OUT.read_text() != text:
            print("docs/reference.md is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main(sys.argv[1:]))
