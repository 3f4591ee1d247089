#!/usr/bin/env bash
# The compose stack as users run it, built and checked end to end: `make test-deploy`,
# run by .ci/run after the test suite.
#
# Builds the image from the Dockerfile and runs docker-compose.yml unmodified (only
# environment overrides: a free published port, a project name of its own), first
# without and then with `--profile worker`, and checks on loopback (deploy/smoke_checks.py):
# /healthz and /readyz, each container's own health check, an append, a payload and a
# search; a restart of the contextd container loses nothing acknowledged; `down` then
# `up` keeps the data (the volume); with the worker up, a compaction is run by the
# worker container (its /metrics counts it, the server's does not). Every container,
# volume, network and image it made is removed on the way out, failed or not.
#
# Engine: docker when a docker daemon answers, else podman (installed with apt-get),
# with podman-compose from PyPI in a venv of its own (Debian's ignores `profiles`).
# Base images: where the engine has no `python:3.11-slim` / `postgres:17-alpine` (no
# registry reachable), stand-ins are built from Debian (deploy/base/: debootstrap from
# the mirror the host's apt uses) and tagged with those names, so that the Dockerfile
# and the compose file run as they are. They are cached as image archives under
# CONTEXTD_DEPLOY_CACHE (/var/cache/contextd-deploy), keyed by a hash of the recipe
# and the mirror; a machine without the cache builds them (a few minutes more).
#
# Environment: CONTEXTD_DEPLOY_ENGINE=podman|docker (default: docker if it answers),
# CONTEXTD_DEPLOY_CACHE, CONTEXTD_DEPLOY_MIRROR (default: read from the apt sources),
# CONTEXTD_DEPLOY_PYTHON (the checks' interpreter; default .venv/bin/python: it needs httpx).
#
# `deploy/smoke.sh --chaos SECONDS` then runs deploy/chaos.py against the stack (faults:
# the contextd and PostgreSQL containers killed and started again under writers).
# The body is one block, read whole before it runs: an edit of this file during a run
# cannot change what the run does next.
{
set -euo pipefail
CHAOS_SECONDS=""
if [ "${1:-}" = --chaos ]; then CHAOS_SECONDS="${2:?usage: smoke.sh [--chaos SECONDS]}"; fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

PY="${CONTEXTD_DEPLOY_PYTHON:-$ROOT/.venv/bin/python}"
CACHE="${CONTEXTD_DEPLOY_CACHE:-/var/cache/contextd-deploy}"
SUITE=bookworm  # Debian's Python is 3.11 there, the Dockerfile's
PODMAN_COMPOSE_VERSION=1.6.0
# In the cache key with deploy/base/*: raise it when this script changes how the
# archives are made or named.
ARCHIVE_FORMAT=2
PROJECT="contextd-smoke-$$"
BASE_IMAGES=(python:3.11-slim postgres:17-alpine)
STATE="$(mktemp -d)"
START=$SECONDS

say() { printf '[smoke %4ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() { say "FAILED: $*"; exit 1; }
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo -n"; fi

apt_install() {
    local missing=() p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} = 0 ] && return 0
    say "apt-get install ${missing[*]}"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
}

# --- the engine -----------------------------------------------------------------------

mkdir -p "$CACHE"
if [ "${CONTEXTD_DEPLOY_ENGINE:-}" != podman ] && command -v docker >/dev/null 2>&1 \
    && docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
    ENGINE=docker
    compose() { docker compose -p "$PROJECT" "$@"; }
else
    [ "${CONTEXTD_DEPLOY_ENGINE:-podman}" = podman ] || fail "no docker daemon answers"
    ENGINE=podman
    apt_install podman runc uidmap slirp4netns netavark aardvark-dns iptables catatonit python3-venv
    # This machine kind: crun refuses its cgroup setup (v1), and no runtime may raise
    # the open-files limit past the host's hard one. A file of ours, not /etc's.
    hard="$(ulimit -Hn)"
    if [ "$hard" = unlimited ]; then hard=1048576; fi
    export CONTAINERS_CONF="$CACHE/containers.conf"
    cat > "$CONTAINERS_CONF.new" <<CONF
# Written by contextd's deploy/smoke.sh for its own runs (CONTAINERS_CONF).
[containers]
default_ulimits = ["nofile=$hard:$hard", "nproc=4096:4096"]
[engine]
runtime = "runc"
CONF
    mv "$CONTAINERS_CONF.new" "$CONTAINERS_CONF"
    # Docker's image format: an OCI image keeps no HEALTHCHECK.
    export BUILDAH_FORMAT=docker
    venv="$CACHE/podman-compose-$PODMAN_COMPOSE_VERSION"
    if [ ! -x "$venv/bin/podman-compose" ]; then
        say "pip install podman-compose==$PODMAN_COMPOSE_VERSION"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet "podman-compose==$PODMAN_COMPOSE_VERSION"
    fi
    # Builds reach the package registries over the host's network.
    compose() {
        "$venv/bin/podman-compose" -p "$PROJECT" --podman-build-args=--network=host "$@"
    }
fi
say "engine: $ENGINE ($($ENGINE --version))"

# Everything made here goes on the way out: containers, networks and volumes through
# compose, images by id (the build's intermediate images too, found by comparing with
# the images there were before).
images_before="$STATE/images-before"
$ENGINE images -a -q --no-trunc | sort -u > "$images_before"
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    if [ $status != 0 ] && [ -f "$STATE/up" ]; then
        say "the logs, as the stack failed:"
        compose --profile worker logs 2>&1 | tail -n 80 | cut -c1-600
    fi
    say "removing the stack and what it made"
    compose --profile worker down -v >/dev/null 2>&1
    local leftover
    leftover="$($ENGINE ps -a -q --filter "label=com.docker.compose.project=$PROJECT")"
    [ -n "$leftover" ] && $ENGINE rm -f $leftover >/dev/null 2>&1
    $ENGINE volume ls -q | grep "^${PROJECT}_" | xargs -r $ENGINE volume rm -f >/dev/null 2>&1
    say "removing images"
    $ENGINE images -a -q --no-trunc | sort -u | comm -13 "$images_before" - \
        | xargs -r $ENGINE rmi -f >/dev/null 2>&1
    rm -rf "$STATE"
    say "cleaned up; $([ $status = 0 ] && echo passed || echo FAILED) in $((SECONDS - START))s"
    exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- base images ----------------------------------------------------------------------

debian_mirror() {
    if [ -n "${CONTEXTD_DEPLOY_MIRROR:-}" ]; then echo "$CONTEXTD_DEPLOY_MIRROR"; return; fi
    python3 deploy/apt_mirror.py
}

have_image() { $ENGINE image inspect "$1" >/dev/null 2>&1; }

base_images() {
    local need=() image
    for image in "${BASE_IMAGES[@]}"; do have_image "$image" || need+=("$image"); done
    if [ ${#need[@]} = 0 ]; then say "base images: the engine's own"; return; fi
    local mirror key
    mirror="$(debian_mirror)" || fail "no Debian mirror in the apt sources: set CONTEXTD_DEPLOY_MIRROR"
    key="$(cat deploy/base/* deploy/apt_mirror.py | cat - <(echo "$mirror $SUITE $ENGINE $ARCHIVE_FORMAT") \
        | sha256sum | cut -c1-16)"
    exec 9>"$CACHE/lock"
    flock 9  # one build of the cache at a time on a machine
    if ! [ -s "$CACHE/base-$key-python.tar" ] || ! [ -s "$CACHE/base-$key-postgres.tar" ]; then
        build_base_images "$mirror" "$key"
    fi
    local standin
    for image in "${need[@]}"; do
        standin="contextd-smoke/${image%%:*}:standin"
        if ! have_image "$standin"; then
            say "loading the $image stand-in from $CACHE"
            $ENGINE load -q -i "$CACHE/base-$key-${image%%:*}.tar" >/dev/null
        fi
        $ENGINE tag "$standin" "$image"
    done
    flock -u 9
    # Archives of other recipes are of no more use.
    find "$CACHE" -maxdepth 1 -name 'base-*.tar' ! -name "base-$key-*" -delete
}

build_base_images() {
    local mirror="$1" key="$2" work
    say "building base-image stand-ins: debootstrap $SUITE from $mirror"
    apt_install debootstrap debian-archive-keyring
    work="$(mktemp -d "$CACHE/build.XXXXXX")"
    bash deploy/base/debootstrap.sh "$mirror" "$SUITE" "$work/rootfs.tar" > "$work/log" 2>&1 \
        || { tail -n 30 "$work/log"; rm -rf "$work"; fail "debootstrap"; }
    # Without PATH, the Dockerfile's `PATH=${VENV}/bin:${PATH}` would leave only the venv.
    $ENGINE import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' "$work/rootfs.tar" contextd-smoke/debian:$SUITE >>"$work/log" 2>&1
    local image name
    for image in "${BASE_IMAGES[@]}"; do
        # Under a name of ours: an image the engine has under the real name stays as it is.
        name="${image%%:*}"
        say "building the $image stand-in"
        $ENGINE build --network host -t "contextd-smoke/$name:standin" \
            -f "deploy/base/$name.Containerfile" deploy/base >>"$work/log" 2>&1 \
            || { tail -n 30 "$work/log"; fail "build $image"; }
        $ENGINE save -o "$work/$name.tar" "contextd-smoke/$name:standin" >>"$work/log" 2>&1
        mv "$work/$name.tar" "$CACHE/base-$key-$name.tar"
    done
    $ENGINE rmi contextd-smoke/debian:$SUITE >/dev/null
    rm -rf "$work"
}

base_images

# --- the stack ------------------------------------------------------------------------

PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export CONTEXTD_PUBLISHED_PORT="$PORT"
URL="http://127.0.0.1:$PORT"
checks() { "$PY" deploy/smoke_checks.py "$1" "$URL" "${@:2}"; }

container_of() {  # the container of a compose service, by the labels both engines set
    $ENGINE ps -q --filter "label=com.docker.compose.project=$PROJECT" \
        --filter "label=com.docker.compose.service=$1"
}

healthy() {  # the engine's own health check of a service's container passes
    local id
    id="$(container_of "$1")"
    [ -n "$id" ] || fail "no running container for $1"
    local deadline=$((SECONDS + 300))
    while [ $SECONDS -lt $deadline ]; do
        if [ $ENGINE = podman ]; then
            # No systemd here to run health checks on a timer: run it now.
            podman healthcheck run "$id" >/dev/null 2>&1 && return 0
        else
            [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] && return 0
        fi
        sleep 2
    done
    fail "$1: its health check never passed"
}

say "building the image from the Dockerfile (compose build)"
compose build contextd > "$STATE/build.log" 2>&1 || { tail -n 40 "$STATE/build.log"; fail "build"; }

say "up, without the worker profile; published on $URL"
touch "$STATE/up"
compose up -d > "$STATE/up.log" 2>&1 || { cat "$STATE/up.log"; fail "up"; }
checks ready
for service in postgres contextd; do healthy $service; done
say "health checks of postgres and contextd pass"
waits="$($ENGINE logs "$(container_of contextd)" 2>&1 | grep -c 'database not reachable yet' || true)"
say "contextd logged $waits wait(s) for PostgreSQL before it came up"
[ -z "$(container_of worker)" ] || fail "a worker runs without its profile"
checks write "$STATE/acked.json" r1
checks verify "$STATE/acked.json"

say "restart of the contextd container"
# (podman without systemd says it cannot set health-check timers: not a failure here)
$ENGINE restart "$(container_of contextd)" 2>&1 >/dev/null | grep -v 'systemd connection' >&2 || true
checks ready
checks verify "$STATE/acked.json"
checks write "$STATE/acked.json" r2

say "down (the volume kept), then up with --profile worker"
compose down > "$STATE/down.log" 2>&1 || { cat "$STATE/down.log"; fail "down"; }
compose --profile worker up -d > "$STATE/up.log" 2>&1 || { cat "$STATE/up.log"; fail "up"; }
checks ready
for service in postgres contextd worker; do healthy $service; done
say "health checks of postgres, contextd and worker pass"
checks verify "$STATE/acked.json"
checks write "$STATE/acked.json" r3

say "a compaction, run by the worker container"
checks compact "$STATE/acked.json"
worker_metrics() {  # /metrics wants the key, as the server's does (SPEC §8)
    $ENGINE exec "$(container_of worker)" python -c "import urllib.request as u; \
print(u.urlopen(u.Request('http://127.0.0.1:8081/metrics', \
headers={'Authorization': 'Bearer ${CONTEXTD_SMOKE_KEY:-dev-key}'}), timeout=10).read().decode())"
}
by_worker="$(worker_metrics | "$PY" -c 'import sys; sys.path.insert(0, "deploy"); from smoke_checks import sum_metric; print(sum_metric(sys.stdin.read(), "contextd_compaction_jobs_total", ["status=\"success\""]))')"
by_server="$(checks metric 'contextd_compaction_jobs_total{status="success"}')"
live="$(checks metric contextd_compaction_workers_live)"
say "compactions run: by the worker $by_worker, by the server $by_server; live workers $live"
[ "${by_worker%.*}" -ge 1 ] || fail "the worker ran no compaction"
[ "${by_server%.*}" = 0 ] || fail "the server ran a compaction while a worker was up"
checks verify "$STATE/acked.json"

say "passed"

if [ -n "$CHAOS_SECONDS" ]; then
    say "chaos for ${CHAOS_SECONDS}s (deploy/chaos.py)"
    "$PY" deploy/chaos.py "$URL" "$ENGINE" "$(container_of contextd)" "$(container_of postgres)" \
        "$CHAOS_SECONDS"
fi
exit 0
}
