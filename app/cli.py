"""`contextd serve | migrate | worker | keys | demo`."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import structlog

from app import cli_args
from app.core.settings import ConfigError, Settings, load_settings

log = structlog.get_logger("contextd")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="contextd", description="Context service for LLM agents")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the HTTP service (migrates first)")
    serve.add_argument("--host", default=None, help="bind address (default CONTEXTD_HOST)")
    serve.add_argument(
        "--port",
        type=cli_args.port,
        default=None,
        help="port (default CONTEXTD_PORT); 0 takes a free one, named in the log's first lines",
    )
    serve.add_argument(
        "--workers",
        type=cli_args.positive,
        default=None,
        help="server processes sharing the port (default: the cores this process may use)",
    )
    sub.add_parser("migrate", help="upgrade the database schema and exit")
    demo = sub.add_parser(
        "demo", help="run examples/agent_loop.py against contextd and a scripted local model"
    )
    demo.add_argument("question", nargs="?", default=None, help="what the user asks the agent")
    worker = sub.add_parser("worker", help="run compaction jobs in this process")
    worker.add_argument(
        "--port",
        type=cli_args.port,
        default=None,
        help="port of its /healthz, /readyz and /metrics (default CONTEXTD_WORKER_PORT)",
    )
    keys = sub.add_parser("keys", help="manage API keys (stored hashed)")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key for a tenant; prints it once")
    create.add_argument("--tenant", required=True, type=cli_args.tenant)
    create.add_argument("--name", default=None)
    revoke = keys_sub.add_parser("revoke", help="revoke a key by its id or the key itself")
    revoke.add_argument("key")
    listing = keys_sub.add_parser("list", help="list keys (ids, tenants, never the keys)")
    listing.add_argument("--tenant", default=None, type=cli_args.tenant)
    keyless = keys_sub.add_parser(
        "keyless",
        help="delete every key (revoked ones too): the next start is keyless, on loopback only",
    )
    keyless.add_argument("--yes", action="store_true", help="do it (without: say what it does)")
    args = parser.parse_args(argv)

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    from app.observability.logging import configure_logging

    # The demo prints its own lines only: not even the embedded server's start.
    level = "WARNING" if args.command == "demo" else settings.log_level
    configure_logging(settings.log_format, level)
    from app.db.embedded import EmbeddedUnavailable, owned_database

    if args.command == "serve":
        _stop_on_signals()
    # An embedded PostgreSQL this command started stops with it, on Ctrl-C and SIGTERM too.
    try:
        with contextlib.ExitStack() as stack:
            try:
                url = stack.enter_context(owned_database(settings))
            except EmbeddedUnavailable as exc:
                print(f"contextd: {exc}", file=sys.stderr)
                return 2
            try:
                return _run(args, settings, url)
            except _NoDatabase as exc:
                where = settings.database_url or "the embedded PostgreSQL"
                print(
                    f"contextd: cannot use the database ({cli_args.redacted(where)}): {exc}",
                    file=sys.stderr,
                )
                return 2
    except _Stopped as stopped:
        # Cleaned up: now end as the signal asked, as uvicorn meant to.
        signal.signal(stopped.signum, signal.SIG_DFL)
        signal.raise_signal(stopped.signum)
        return 128 + stopped.signum


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop_on_signals() -> None:
    """SIGINT and SIGTERM unwind the stack (and its `finally`s) instead of ending the
    process where it stands. uvicorn handles both while it serves, and raises the
    signal again once it has shut down gracefully: that lands here too."""

    def stop(signum: int, frame: object) -> None:
        raise _Stopped(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)


def _run(args: argparse.Namespace, settings: Settings, url: str) -> int:
    if args.command in ("serve", "worker"):
        _wait_for_database(url, settings.database_wait_s)
    if args.command == "migrate":
        _migrate(url)
        return 0
    if args.command == "serve":
        _migrate(url)
        return _serve(
            settings, url, args.host, args.port, args.workers or cli_args.default_workers()
        )
    if args.command == "demo":
        _migrate(url)
        from app.demo import DEFAULT_QUESTION, run_demo

        return run_demo(settings, url, args.question or DEFAULT_QUESTION)
    if args.command == "keys":
        _migrate(url)
        from app.auth.cli import run_keys

        return run_keys(url, args, settings)
    if args.command == "worker":
        from app.worker import run_worker

        _migrate(url, check_only=True)  # the worker does not migrate: the serve does
        return run_worker(settings, url, args.port)
    return 2


class _NoDatabase(Exception):
    """The database could not be reached or refused us: said in one line, not a traceback."""


def _wait_for_database(url: str, wait_s: float) -> None:
    from app.db.wait import DatabaseUnreachable, wait_for_database

    try:
        wait_for_database(url, wait_s)
    except DatabaseUnreachable as exc:
        raise _NoDatabase(str(exc)) from exc


def _migrate(url: str, check_only: bool = False) -> None:
    """Upgrade the schema, or only check the database's encoding (the migration does too)."""
    import asyncpg
    from sqlalchemy.exc import DBAPIError

    from app.db.migrate import DatabaseNotUtf8, check_database_encoding
    from app.index.unindexed import upgrade

    try:
        (check_database_encoding if check_only else upgrade)(url)
    except DatabaseNotUtf8 as exc:
        raise _NoDatabase(str(exc)) from exc
    except DBAPIError as exc:  # the driver's error, wrapped
        raise _NoDatabase(str(exc.orig).split("\n")[0]) from exc
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise _NoDatabase(f"{type(exc).__name__}: {exc}") from exc
    if not check_only:
        log.info("schema at head")


def per_process(total: int, workers: int) -> int:
    """A machine-wide size (pool connections, compaction runners) shared out across processes."""
    return max(1, math.ceil(total / workers))


# Set by the parent of `serve --workers N` for its children only.
_PARENT_PID_ENV = "CONTEXTD_SERVE_PARENT_PID"
_METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
HEALTHCHECK_TIMEOUT_S = 60


def _serve(
    settings: Settings, url: str, host: str | None, port: int | None, workers: int = 1
) -> int:
    import uvicorn

    from app.auth.cli import keys_configured

    host = host or settings.host
    port = settings.port if port is None else port
    if not keys_configured(settings, url):
        if host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("no API keys configured: refusing to bind beyond loopback", requested=host)
            host = "127.0.0.1"
        # Port 0 is named once bound (uvicorn's "running on" line, or "listening").
        where = {"host": host, **({"port": port} if port else {})}
        log.warning("no API keys configured; listening on loopback only", **where)
    # Agents reuse idle connections between model calls; a 5 s keep-alive races with them.
    options: dict[str, Any] = {"log_config": None, "access_log": False, "timeout_keep_alive": 30}
    if workers == 1:
        from app.main import create_app

        _tune_gc()
        uvicorn.run(create_app(settings, database_url=url), host=host, port=port, **options)
        return 0
    return _serve_processes(settings, url, host, port, workers, options)


def _serve_processes(
    settings: Settings, url: str, host: str, port: int, workers: int, options: dict[str, Any]
) -> int:
    """N uvicorn processes accepting on one socket, bound here in the parent.

    The parent has already resolved the database (an embedded PostgreSQL is started
    once, here) and migrated it; the children get the resolved URL and their share of
    the pool and of the compaction runners through the environment, and build their
    app with `worker_app`. uvicorn's supervisor replaces a child that dies and, on
    SIGTERM or SIGINT, stops every child gracefully (in-flight requests finish) before
    the parent exits. Metrics go through prometheus-client's multiprocess mode: every
    process writes its values to files in one directory the parent owns, and /metrics
    in any child sums them.
    """
    import shutil
    import tempfile

    import uvicorn

    metrics_dir = os.environ.get(_METRICS_DIR_ENV)
    owned = metrics_dir is None
    if metrics_dir is None:
        metrics_dir = tempfile.mkdtemp(prefix="contextd-metrics-")
    else:
        Path(metrics_dir).mkdir(parents=True, exist_ok=True)
        # Values left by an earlier run would be summed into this one's.
        for stale in Path(metrics_dir).glob("*.db"):
            stale.unlink()
    os.environ.update(
        {
            _METRICS_DIR_ENV: metrics_dir,
            _PARENT_PID_ENV: str(os.getpid()),
            "CONTEXTD_DATABASE_URL": url,
            # The pool size is the whole server's: each process gets its share.
            "CONTEXTD_DB_POOL_SIZE": str(per_process(settings.db_pool_size, workers)),
            "CONTEXTD_COMPACTION_WORKERS": str(per_process(settings.compaction_workers, workers)),
        }
    )
    log.info(
        "serving with several processes",
        workers=workers,
        pool_per_process=os.environ["CONTEXTD_DB_POOL_SIZE"],
        metrics_dir=metrics_dir,
    )
    import inspect

    if "timeout_worker_healthcheck" in inspect.signature(uvicorn.run).parameters:
        # uvicorn kills a child that does not answer its supervisor's ping in time, and
        # a child cannot answer before its imports are done: over 5 s (the default) on
        # a loaded machine, where every replacement was killed in turn, forever.
        options["timeout_worker_healthcheck"] = HEALTHCHECK_TIMEOUT_S
    try:
        return _run_children(host, port, {"factory": True, "workers": workers, **options})
    finally:
        if owned:
            shutil.rmtree(metrics_dir, ignore_errors=True)


def _run_children(host: str, port: int, options: dict[str, Any]) -> int:
    """uvicorn's supervisor over the children, each listening on its own socket (Linux)."""
    import uvicorn
    import uvicorn.supervisors

    app = "app.cli:worker_app"
    if sys.platform != "linux":  # SO_REUSEPORT does not spread connections elsewhere
        uvicorn.run(app, host=host, port=port, **options)
        return 0
    try:
        sockets = ChildListeners.reserve(host, port)
    except OSError as exc:
        log.error("cannot listen", host=host, port=port, error=str(exc))
        return 3  # uvicorn's STARTUP_FAILURE
    log.info("listening", url=f"http://{host}:{sockets.port}", host=host, port=sockets.port)
    try:
        config = uvicorn.Config(app, host=host, port=sockets.port, **options)
        uvicorn.supervisors.Multiprocess(config, sockets=sockets).run()
    finally:
        sockets[0].close()
    return 0


class ChildListeners(list[socket.socket]):
    """The listening socket of one child of `serve --workers N`: its own, on the shared port.

    uvicorn hands every child one socket bound in the parent, and a child's loop
    (libuv) accepts every connection queued when it wakes: bursts of 50 connections
    split 34 / 16 on average and up to 50 / 0, and bench/load.py's 50 keep-alive
    agents split 34 / 16, where the 34 waited 1.6x as long for the rest of the run. Each child
    listens on a socket of its own instead (SO_REUSEPORT), and Linux spreads new
    connections over the listening sockets by their addresses. This list crosses to
    the child by pickle, which opens that socket there. The parent only holds the
    port: a bound socket that never listens takes no connections.
    """

    def __init__(self, host: str, port: int, held: socket.socket) -> None:
        super().__init__([held])
        self.host, self.port = host, port

    @classmethod
    def reserve(cls, host: str, port: int) -> ChildListeners:
        # A plain bind first: SO_REUSEPORT alone would share the port with another
        # server of this user already on it, silently, instead of failing.
        with _new_socket(host) as probe:
            probe.bind((host, port))
            if port == 0:
                port = probe.getsockname()[1]
        return cls(host, port, _reuse_port(host, port))

    def __reduce__(self) -> tuple[Any, tuple[str, int]]:
        return _child_listener, (self.host, self.port)


def _new_socket(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    return sock


def _reuse_port(host: str, port: int) -> socket.socket:
    sock = _new_socket(host)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _child_listener(host: str, port: int) -> list[socket.socket]:
    """Run in the child as its socket list is unpickled; uvicorn makes it listen."""
    return [_reuse_port(host, port)]


def worker_app() -> Any:
    """The app of one child of `serve --workers N` (uvicorn imports it by name)."""
    _exit_with_parent()
    settings = load_settings()
    from app.main import create_app
    from app.observability.logging import configure_logging

    configure_logging(settings.log_format, settings.log_level)
    _tune_gc()
    return create_app(settings, database_url=settings.database_url)


# Allocations (less deallocations) of container objects between two young-generation
# collections; CPython's default is 700. A payload call builds a few thousand short-
# lived objects that reference counting frees anyway, and at 700 the collector ran
# about twice per context call and promoted enough to run a full collection every
# ~140 calls, which walks every cached message body of the process (~95 ms each in
# an in-process run at 20k messages: the context calls' mean went 7.4 -> 6.1 ms of
# CPU with this threshold). Cycles are still collected, less often.
GC_YOUNG_THRESHOLD = 50_000


def _tune_gc() -> None:
    """For a serving process only (tests and benches keep the interpreter's defaults)."""
    import gc

    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def _exit_with_parent() -> None:
    """Ask Linux for a SIGTERM when the parent dies: a parent killed with SIGKILL cannot
    stop its children, which would otherwise keep serving on the port, unsupervised."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    parent = os.environ.get(_PARENT_PID_ENV)
    if parent and os.getppid() != int(parent):  # it died before we asked
        os.kill(os.getpid(), signal.SIGTERM)


if __name__ == "__main__":
    sys.exit(main())
