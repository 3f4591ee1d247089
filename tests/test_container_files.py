"""The container files agree with the code they package (no Docker needed).

Dockerfile, .dockerignore and docker-compose.yml are read as text/YAML and checked
against pyproject.toml, `app.core.settings` and `app.health`: what users rely on when
they run `docker compose up` is that the image installs the same project the tests
install, finds its migrations, listens where compose publishes, is probed on a
real endpoint, and is configured only through settings that exist.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from app.api.health import router as health_router
from app.core.settings import CompactionSettings, Settings

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
COMPOSE = ROOT / "docker-compose.yml"
ENV_FILE = ROOT / "contextd.env"
PYPROJECT = ROOT / "pyproject.toml"


# --- a small Dockerfile reader -------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)


def _instructions(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comment lines inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        if full:
            keyword, _, args = full.partition(" ")
            out.append(Instruction(keyword.upper(), args.strip()))
    return out


def _expand(value: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: variables.get(m[1] or m[2], m[0]), value)


def _arg(args: str) -> tuple[str, str]:
    name, _, default = args.partition("=")
    return name.strip(), default.strip().strip('"')


def parse_dockerfile(text: str) -> Dockerfile:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for ins in _instructions(text):
        if ins.keyword == "FROM":
            words = ins.args.split()
            base = _expand(words[0], global_args)
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base=base, name=name))
        elif not stages:
            if ins.keyword == "ARG":
                k, v = _arg(ins.args)
                global_args[k] = v
        else:
            stage = stages[-1]
            if ins.keyword == "ARG":
                k, v = _arg(ins.args)
                stage.args[k] = v or global_args.get(k, "")
            stage.instructions.append(Instruction(ins.keyword, _expand(ins.args, stage.args)))
    return Dockerfile(global_args, stages)


def env_of(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for args in stage.all("ENV"):
        for token in shlex.split(args):
            key, sep, value = token.partition("=")
            if sep:
                env[key] = value
    return env


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return data


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text())


def _setting_names() -> set[str]:
    names = {"CONTEXTD_" + name.upper() for name in Settings.model_fields if name != "compaction"}
    names |= {"COMPACTION_" + name.upper() for name in CompactionSettings.model_fields}
    return names


def _container_port(mapping: str | dict[str, Any]) -> int:
    if isinstance(mapping, dict):
        return int(mapping["target"])
    return int(str(mapping).rsplit(":", 1)[-1].split("/")[0])


# --- the image -----------------------------------------------------------------------


def test_python_in_image_satisfies_requires_python(
    dockerfile: Dockerfile, pyproject: dict[str, Any]
) -> None:
    requires = SpecifierSet(pyproject["project"]["requires-python"])
    for stage in dockerfile.stages:
        m = re.fullmatch(r"python:(\d+\.\d+)(?:\.\d+)?(?:-[\w.-]+)?", stage.base)
        assert m, f"stage {stage.name} is not built on an official python image: {stage.base}"
        assert requires.contains(m[1] + ".0"), f"{stage.base} does not satisfy {requires}"
    assert len({s.base for s in dockerfile.stages}) == 1, "builder and runtime must share a base"


def test_image_installs_the_project_from_pyproject(dockerfile: Dockerfile) -> None:
    builder = dockerfile.stages[0]
    copied = " ".join(builder.all("COPY"))
    assert "pyproject.toml" in copied
    installs = [r for r in builder.all("RUN") if "pip install" in r]
    assert installs, "the builder installs nothing"
    project_installed = False
    for run in installs:
        for command in run.split("&&"):
            if "pip install" not in command:
                continue
            words = shlex.split(command)
            targets = [w for w in words[words.index("install") + 1 :] if not w.startswith("-")]
            if "-r" in words or "--requirement" in words:
                # Dependencies: only a list generated from pyproject.toml in this very
                # step, never one kept in the repository or package names repeated here.
                assert "tomllib" in run and "pyproject.toml" in run and "['dependencies']" in run
                assert "optional-dependencies" not in run, "no extras (no dev tools)"
                continue
            # The project itself: `.`, plain (non-editable), no extras.
            assert targets == ["."], f"installs something other than the project: {command}"
            assert "-e" not in words and "--editable" not in words
            project_installed = True
    assert project_installed
    assert not list(ROOT.glob("requirements*.txt")), "a second dependency list next to pyproject"


def test_the_image_carries_only_the_venv_and_the_venv_carries_the_migrations(
    dockerfile: Dockerfile,
) -> None:
    # The wheel has app/db/migrations inside the package (tests/test_packaging.py installs
    # one and migrates with it); the builder copies what the wheel is built from.
    builder = dockerfile.stages[0]
    copied = {s.rstrip("/") for a in builder.all("COPY") for s in shlex.split(a)[:-1]}
    assert {"pyproject.toml", "README.md", "setup.py", "app"} <= copied
    assert any("migrations_dir()" in r and "python -I" in r for r in builder.all("RUN")), (
        "the builder checks the installed package finds its migrations"
    )
    # The search vector's C loops are optional to setup.py, not to the image: the
    # builder has the compiler, and the build fails if the module was not made.
    assert any("install" in r and "gcc" in r for r in builder.all("RUN"))
    assert any('python -I -c "import app.index._vector"' in r for r in builder.all("RUN"))
    assert not any("gcc" in r for r in dockerfile.final.all("RUN")), "no compiler at run time"
    runtime_copies = [shlex.split(a) for a in dockerfile.final.all("COPY")]
    from_builder = [c for c in runtime_copies if c[0].startswith("--from=")]
    venv = builder.args["VENV"]
    assert [c[-2:] for c in from_builder] == [[venv, venv]], "the venv alone, at its build path"


def test_image_runs_as_a_fixed_non_root_user(dockerfile: Dockerfile) -> None:
    users = dockerfile.final.all("USER")
    assert users, "the runtime stage never leaves root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0", "")
    assert user.isdigit() and int(user) >= 1000, f"want a fixed numeric uid, got {user!r}"


def test_healthcheck_probes_healthz(dockerfile: Dockerfile) -> None:
    checks = dockerfile.final.all("HEALTHCHECK")
    assert len(checks) == 1
    check = checks[0]
    assert "/healthz" in check
    assert "curl" not in check and "wget" not in check, "python:*-slim has neither"
    paths = {getattr(route, "path", None) for route in health_router.routes}
    assert "/healthz" in paths


def test_entrypoint_serves(dockerfile: Dockerfile, pyproject: dict[str, Any]) -> None:
    assert dockerfile.final.all("ENTRYPOINT") == ['["contextd"]']
    assert dockerfile.final.all("CMD") == ['["serve"]']
    assert "contextd" in pyproject["project"]["scripts"]


def test_ports_agree(dockerfile: Dockerfile, compose: dict[str, Any]) -> None:
    default_port = Settings.model_fields["port"].default
    worker_port = Settings.model_fields["worker_port"].default
    exposed = {int(p.split("/")[0]) for a in dockerfile.final.all("EXPOSE") for p in a.split()}
    assert exposed == {default_port, worker_port}
    env = env_of(dockerfile.final)
    assert int(env["CONTEXTD_PORT"]) == default_port
    assert env["CONTEXTD_HOST"] == "0.0.0.0"
    ports = compose["services"]["contextd"]["ports"]
    assert {_container_port(p) for p in ports} == {default_port}


def test_image_env_names_real_settings(dockerfile: Dockerfile) -> None:
    ours = {k for k in env_of(dockerfile.final) if k.startswith(("CONTEXTD_", "COMPACTION_"))}
    assert ours <= _setting_names(), ours - _setting_names()
    assert Settings.model_fields["log_format"].annotation is str
    assert env_of(dockerfile.final)["CONTEXTD_LOG_FORMAT"] == "json"


# --- the build context -----------------------------------------------------------------


def _ignored(path: str, patterns: list[str]) -> bool:
    """Approximately Docker's rule: the last pattern matching the path or a parent wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        pattern = pattern.rstrip("/")
        candidates = [pattern] + ([pattern[3:]] if pattern.startswith("**/") else [])
        if any(fnmatch.fnmatchcase(p, c) for p in prefixes for c in candidates):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_what_the_build_copies(dockerfile: Dockerfile) -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    for args in dockerfile.stages[0].all("COPY"):
        *sources, _dest = shlex.split(args)
        for source in sources:
            source = source.rstrip("/")
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            probe = f"{source}/__init__.py" if (ROOT / source).is_dir() else source
            assert not _ignored(probe, patterns), f"{source} is excluded from the build context"
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        ".contextd/pgdata/PG_VERSION",
        "bench/results/run.json",
        "app/__pycache__/cli.cpython-311.pyc",
        ".mypy_cache/3.11/app.json",
        "app/index/_vector.cpython-311-x86_64-linux-gnu.so",
    ):
        assert _ignored(path, patterns), f"{path} would be sent to the Docker daemon"


# --- compose ---------------------------------------------------------------------------


def _env_names(service: dict[str, Any]) -> set[str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return {str(item).split("=", 1)[0] for item in env}
    return set(env)


def test_compose_waits_for_a_healthy_postgres(compose: dict[str, Any]) -> None:
    services = compose["services"]
    check = services["postgres"]["healthcheck"]["test"]
    assert "pg_isready" in " ".join(check if isinstance(check, list) else [check])
    for name in ("contextd", "worker"):
        if name in services:
            depends = services[name]["depends_on"]
            assert depends["postgres"]["condition"] == "service_healthy", name
    assert services["contextd"]["build"] in (".", {"context": "."})


def test_every_service_has_its_own_health_check(compose: dict[str, Any]) -> None:
    # Said in the compose file, not left to an image: an OCI build (podman's default)
    # keeps no HEALTHCHECK, and depends_on: service_healthy would wait on nothing.
    for name, service in compose["services"].items():
        check = service.get("healthcheck") or {}
        assert check.get("test") and not check.get("disable"), name
        assert check.get("start_period") and check.get("retries"), name


def test_the_server_health_check_is_the_image_one(
    dockerfile: Dockerfile, compose: dict[str, Any]
) -> None:
    (image_check,) = dockerfile.final.all("HEALTHCHECK")
    command = json.loads(image_check.split(" CMD ", 1)[1])
    assert compose["services"]["contextd"]["healthcheck"]["test"] == ["CMD", *command]


def test_one_build_for_server_and_worker(compose: dict[str, Any]) -> None:
    services = compose["services"]
    built = [name for name, service in services.items() if "build" in service]
    assert built == ["contextd"]
    # The worker runs the image contextd builds, never one of its own or a pulled one.
    assert services["worker"]["image"] == services["contextd"]["image"]
    assert services["worker"]["pull_policy"] == "never"


def test_the_published_port_is_a_variable_on_loopback(compose: dict[str, Any]) -> None:
    default_port = Settings.model_fields["port"].default
    (mapping,) = compose["services"]["contextd"]["ports"]
    assert mapping == f"127.0.0.1:${{CONTEXTD_PUBLISHED_PORT:-{default_port}}}:{default_port}"
    # Not a setting of the app: compose reads it, the container never sees it.
    assert "CONTEXTD_PUBLISHED_PORT" not in _setting_names()


def test_compose_database_url_points_at_the_postgres_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    pg_env = services["postgres"]["environment"]
    url = services["contextd"]["environment"]["CONTEXTD_DATABASE_URL"]
    expected = (
        f"postgresql://{pg_env['POSTGRES_USER']}:{pg_env['POSTGRES_PASSWORD']}"
        f"@postgres:5432/{pg_env['POSTGRES_DB']}"
    )
    assert url == expected


def test_compose_sets_only_real_settings(compose: dict[str, Any]) -> None:
    known = _setting_names()
    for name in ("contextd", "worker"):
        if name in compose["services"]:
            passed = _env_names(compose["services"][name])
            assert passed, f"{name} gets no configuration"
            assert passed <= known, f"{name}: not settings: {sorted(passed - known)}"


def test_compose_makes_the_service_reachable(compose: dict[str, Any]) -> None:
    # Without API keys the server binds loopback only (app/cli.py), which inside a
    # container means unreachable through the published port.
    env = compose["services"]["contextd"]["environment"]
    assert env.get("CONTEXTD_API_KEYS"), "without keys the container listens on loopback only"


def test_worker_is_optional_and_probed_on_its_own_port(compose: dict[str, Any]) -> None:
    worker = compose["services"].get("worker")
    if worker is None:
        pytest.skip("no worker service")
    assert worker.get("profiles"), "the worker must stay behind a profile"
    assert worker["command"] == ["worker"]
    check = worker["healthcheck"]
    assert not check.get("disable")
    probe = " ".join(check["test"])
    port = Settings.model_fields["worker_port"].default
    assert "CONTEXTD_WORKER_PORT" in probe and f"'{port}'" in probe
    paths = {getattr(route, "path", None) for route in health_router.routes}
    probed = re.findall(r"'(/\w+)'", probe)
    assert probed and set(probed) <= paths, probed
    assert "curl" not in probe and "wget" not in probe
    assert str(port) in {str(p) for p in worker.get("expose", [])}


def test_compose_leaves_in_process_compactions_to_auto(compose: dict[str, Any]) -> None:
    # With the worker profile up, the server must not run jobs too: "auto" defers to
    # live workers, so neither compose nor the env file may force it on.
    assert Settings.model_fields["run_compactions_in_process"].default == "auto"
    for name in ("contextd", "worker"):
        env = compose["services"][name].get("environment") or {}
        assert "CONTEXTD_RUN_COMPACTIONS_IN_PROCESS" not in env, name
    assert "CONTEXTD_RUN_COMPACTIONS_IN_PROCESS" not in _env_file_active()


# --- contextd.env ----------------------------------------------------------------------

_ENV_LINE = re.compile(r"^(#\s*)?((?:CONTEXTD|COMPACTION)_[A-Z0-9_]+)=(.*)$")


def _env_file_entries() -> list[tuple[str, str, bool]]:
    """(name, value, active) for every `NAME=value` line, commented or not."""
    out = []
    for line in ENV_FILE.read_text().splitlines():
        m = _ENV_LINE.match(line.strip())
        if m:
            out.append((m[2], m[3], m[1] is None))
    return out


def _env_file_active() -> dict[str, str]:
    return {name: value for name, value, active in _env_file_entries() if active}


def _as_env(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _defaults() -> dict[str, str]:
    out = {
        "CONTEXTD_" + n.upper(): _as_env(f.default)
        for n, f in Settings.model_fields.items()
        if n != "compaction"
    }
    out |= {
        "COMPACTION_" + n.upper(): _as_env(f.default)
        for n, f in CompactionSettings.model_fields.items()
    }
    return out


def test_env_file_lists_every_setting_once_with_its_default(dockerfile: Dockerfile) -> None:
    entries = _env_file_entries()
    names = [name for name, _, _ in entries]
    assert len(names) == len(set(names)), "a setting listed twice"
    assert set(names) == _setting_names(), {
        "missing": sorted(_setting_names() - set(names)),
        "not settings": sorted(set(names) - _setting_names()),
    }
    image_env = env_of(dockerfile.final)
    defaults = _defaults()
    for name, value, active in entries:
        if active:
            continue  # a deliberate choice for the containers
        # A commented line shows what is in force: the default, or the image's ENV.
        assert value in (defaults[name], image_env.get(name)), (name, value, defaults[name])
    assert not any(value == "" for _, value, active in entries if active), (
        "an empty value is a value to the settings: comment the line out"
    )


def test_every_contextd_service_reads_the_env_file(compose: dict[str, Any]) -> None:
    for name in ("contextd", "worker"):
        if name in compose["services"]:
            env_file = compose["services"][name]["env_file"]
            files = [env_file] if isinstance(env_file, str) else env_file
            assert "contextd.env" in [f if isinstance(f, str) else f["path"] for f in files]


# --- the smoke test of the stack -------------------------------------------------------


def test_ci_smoke_tests_the_stack_after_the_suite() -> None:
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines.index("make test") < lines.index("make test-deploy")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test-deploy:.*\n\tbash deploy/smoke\.sh$", makefile, re.M)
    smoke = (ROOT / "deploy" / "smoke.sh").read_text()
    # The files run as they are: the script names no compose file (compose finds the
    # repository's own), so it cannot run or edit another.
    code = re.sub(r"^\s*#.*$", "", smoke, flags=re.M)
    assert "docker-compose" not in code and "compose.y" not in code
