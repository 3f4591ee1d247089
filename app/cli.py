"""`contextd serve | migrate | worker`."""

from __future__ import annotations

import argparse
import sys

import structlog

from app.settings import ConfigError, Settings, load_settings

log = structlog.get_logger("contextd")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="contextd", description="Context service for LLM agents")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service (migrates first)")
    serve.add_argument("--host", default=None, help="bind address (default CONTEXTD_HOST)")
    serve.add_argument("--port", type=int, default=None, help="port (default CONTEXTD_PORT)")
    sub.add_parser("migrate", help="upgrade the database schema and exit")
    sub.add_parser("worker", help="run compaction jobs in this process")
    keys = sub.add_parser("keys", help="manage API keys (stored hashed)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key for a tenant; prints it once")
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", default=None)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id or the key itself")
    revoke.add_argument("key")
    listing = keys_sub.add_parser("list", help="list keys (ids, tenants, never the keys)")
    listing.add_argument("--tenant", default=None)
    args = parser.parse_args(argv)

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    from app.observability.logging import configure_logging

    configure_logging(settings.log_format, settings.log_level)
    from app.embedded_pg import EmbeddedUnavailable

    try:
        url = _database_url(settings)
    except EmbeddedUnavailable as exc:
        print(f"contextd: {exc}", file=sys.stderr)
        return 2
    if args.command == "migrate":
        _migrate(url)
        return 0
    if args.command == "serve":
        _migrate(url)
        return _serve(settings, url, args.host, args.port)
    if args.command == "keys":
        _migrate(url)
        from app.auth.cli import run_keys

        return run_keys(url, args)
    if args.command == "worker":
        from app.compaction.worker import run_worker

        return run_worker(settings, url)
    return 2


def _database_url(settings: Settings) -> str:
    from app.embedded_pg import resolve_database_url

    return resolve_database_url(settings)


def _migrate(url: str) -> None:
    from app.db import run_migrations

    run_migrations(url)
    log.info("schema at head")


def _serve(settings: Settings, url: str, host: str | None, port: int | None) -> int:
    import uvicorn

    from app.auth.cli import keys_configured
    from app.main import create_app

    host = host or settings.host
    port = port or settings.port
    if not keys_configured(settings, url):
        if host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("no API keys configured: refusing to bind beyond loopback", requested=host)
            host = "127.0.0.1"
        log.warning("no API keys configured; listening on loopback only", host=host, port=port)
    app = create_app(settings, database_url=url)
    # Agents reuse idle connections between model calls; a 5 s keep-alive races with them.
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, timeout_keep_alive=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
