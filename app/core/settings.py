"""One settings tree: `CONTEXTD_*` for the service, `COMPACTION_*` for budget and compaction.

Everything is validated when the process starts, with messages that name the
environment variable at fault, so a typo fails the deploy instead of a request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.limits import TOKENS_MAX


class CompactionSettings(BaseSettings):
    """Budget and compaction knobs (SPEC §4). A session may override any of them."""

    # allow_inf_nan: `inf` seconds or ratios pass every bound and then break arithmetic
    # far from here (an infinite job lease stopped every compaction).
    model_config = SettingsConfigDict(
        env_prefix="COMPACTION_", extra="ignore", env_ignore_empty=True, allow_inf_nan=False
    )

    # Bounded as a session's own `context_limit` is: an unknown model has no window to
    # cap an override, and a limit past bigint reached PostgreSQL in the payload's read.
    context_limit: int = Field(128_000, gt=0, le=TOKENS_MAX)
    reserved_output_tokens: int = Field(2048, ge=0, le=TOKENS_MAX)
    safety_margin_tokens: int = Field(1024, ge=0, le=TOKENS_MAX)
    warn_ratio: float = 0.80
    compact_ratio: float = 0.90
    min_preserved_turns: int = Field(8, ge=0)
    # Planning by tokens and steps (SPEC §5): the preserved tail is at most this share of
    # the usable budget, never less than the current turn's last `min_preserved_steps` steps.
    keep_recent_ratio: float = Field(0.3, gt=0, lt=1)
    min_preserved_steps: int = Field(4, ge=1)
    # The summary's verbatim `user_messages` section: at most this share of the usable budget.
    user_messages_ratio: float = Field(0.15, gt=0, lt=1)
    # The summary's verbatim `artifacts` section (files, commands, values tools returned):
    # at most this share of the usable budget, newest kept first; 0 leaves it out.
    artifacts_ratio: float = Field(0.1, ge=0, lt=1)
    compact_timeout_s: float = Field(30.0, gt=0)
    flush_timeout_s: float = Field(30.0, gt=0)
    fail_open: bool = True
    max_flush_candidates: int = Field(20, ge=0)
    max_candidate_text_bytes: int = Field(2048, gt=0)
    max_compactions_per_request: int = Field(2, ge=0)
    summary_temperature: float = 0.1
    anchor_retry_enabled: bool = True
    # Thrash guards: skip a compaction that frees less than this share of the
    # usable budget, and wait until the history has regrown by this share.
    min_free_ratio: float = Field(0.05, ge=0, lt=1)
    regrowth_ratio: float = Field(0.25, ge=0, lt=10)

    @model_validator(mode="after")
    def _check_ratios(self) -> Self:
        problems = check_compaction(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def usable_budget(self) -> int:
        return self.context_limit - self.reserved_output_tokens - self.safety_margin_tokens


def check_compaction(c: CompactionSettings, *, session: bool = False) -> list[str]:
    """Cross-field rules of SPEC §4, shared by start-up validation and session overrides;
    each problem names what the operator set (`COMPACTION_WARN_RATIO`) or, for a
    session's override, the session's fields (`compaction.warn_ratio`)."""

    def name(key: str) -> str:
        if not session:
            return f"COMPACTION_{key.upper()}"
        return key if key == "context_limit" else f"compaction.{key}"

    problems = []
    if not 0 < c.warn_ratio < c.compact_ratio < 1:
        problems.append(
            f"need 0 < warn_ratio < compact_ratio < 1 ({name('warn_ratio')}={c.warn_ratio}, "
            f"{name('compact_ratio')}={c.compact_ratio})"
        )
    if c.usable_budget <= 0:
        problems.append(
            f"usable budget must be > 0: {name('context_limit')} ({c.context_limit}) - "
            f"{name('reserved_output_tokens')} ({c.reserved_output_tokens}) - "
            f"{name('safety_margin_tokens')} ({c.safety_margin_tokens}) = {c.usable_budget}"
        )
    if not 0 <= c.summary_temperature <= 1:
        problems.append(
            f"{name('summary_temperature')} must be in [0, 1], got {c.summary_temperature}"
        )
    return problems


_POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+asyncpg://")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CONTEXTD_", extra="ignore", env_ignore_empty=True, allow_inf_nan=False
    )

    database_url: str | None = None
    data_dir: Path = Path(".contextd")
    host: str = "127.0.0.1"
    port: int = Field(8080, gt=0, lt=65536)
    log_format: str = Field("auto", pattern="^(auto|json|console)$")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    default_model: str = "gpt-4o"

    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: SecretStr | None = None
    # Retries of a 429/5xx/dropped call, always within compact_timeout_s.
    llm_max_retries: int = Field(2, ge=0, le=10)
    # Reasoning models want max_completion_tokens and no temperature; auto guesses from
    # the model name and learns from the endpoint's 400 naming the parameter.
    llm_reasoning: Literal["auto", "true", "false"] = "auto"
    # auto: json_schema, stepping down to json_object (with llama.cpp's `schema` key, then
    # without), then none, as the endpoint allows.
    llm_json_mode: Literal["auto", "json_schema", "json_object", "off"] = "auto"

    api_keys: SecretStr | None = None

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(_POSTGRES_SCHEMES):
            raise ValueError("must be a PostgreSQL URL: postgresql://user@host:5432/database")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    # Input limits (SPEC §8): each answers with a clear 413/422.
    max_body_bytes: int = Field(8 * 1024 * 1024, gt=0)
    max_messages_per_append: int = Field(1000, gt=0)
    max_message_bytes: int = Field(2 * 1024 * 1024, gt=0)
    max_page_size: int = Field(1000, gt=0)
    # The smallest preview limit: a payload's is the larger of this and a sixteenth of its
    # budget (app/context/making.py); the re-read count at append time, which has no
    # budget, uses this.
    tool_preview_tokens: int = Field(2000, gt=0)
    # Prompt-cache stability (app/context/stability.py): a payload that must trim is cut
    # down to this share of its budget, so the calls after it append again.
    trim_target_ratio: float = Field(0.7, gt=0, le=1)

    # Group commit (app/messages/group_commit.py): at most this many appends of different
    # sessions share one transaction. 1 writes each append in a transaction of its
    # own, touching one session, as a database distributed by session (Citus) wants.
    append_group_size: int = Field(64, ge=1, le=1000)
    db_pool_size: int = Field(10, gt=0)
    db_pool_timeout_s: float = Field(5.0, gt=0)
    # `serve` and `worker` wait this long for a database that takes no connection yet
    # (compose starts them beside it), retrying with a growing pause; 0: no wait.
    database_wait_s: float = Field(60.0, ge=0)
    # "auto": the server runs compaction jobs unless a `contextd worker` is alive
    # (heartbeat in the database), so a deployment with workers needs no switch.
    run_compactions_in_process: bool | Literal["auto"] = "auto"
    # A runner renews its job lease every third of this; a job whose runner
    # died is taken over this long after its last renewal.
    job_lease_s: float = Field(15.0, gt=0)
    compaction_workers: int = Field(2, ge=1, le=32)
    # Fair claims (SPEC §7): no tenant holds more running jobs than this, so one
    # tenant's burst leaves runners free for the others.
    compaction_tenant_max_running: int = Field(4, ge=1)
    # `contextd worker` serves /healthz, /readyz and /metrics on this port.
    worker_port: int = Field(8081, ge=0, lt=65536)

    compaction: CompactionSettings = Field(default_factory=CompactionSettings)


def load_settings(**overrides: Any) -> Settings:
    """Build settings from the environment, turning pydantic errors into one readable line each."""
    try:
        overrides.setdefault("compaction", CompactionSettings())
    except ValidationError as exc:
        raise ConfigError(_describe(exc, "COMPACTION_")) from None
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, "CONTEXTD_")) from None


class ConfigError(Exception):
    """The environment describes an impossible configuration; the message names the variables."""


def _describe(exc: ValidationError, prefix: str) -> str:
    lines = ["invalid configuration:"]
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        var = prefix + "_".join(loc).upper() if loc else prefix + "*"
        lines.append(f"  {var}: {err['msg']}")
    return "\n".join(lines)
