# contextd image: `docker build -t contextd .`, or `docker compose up` (see docker-compose.yml).
#
# Set CONTEXTD_DATABASE_URL (compose does). The embedded PostgreSQL (the `embedded`
# extra) is not installed in the image: without a URL `contextd` exits with status 2
# and "no CONTEXTD_DATABASE_URL is set and the embedded PostgreSQL is not installed".
# The app refuses to listen beyond loopback when no API keys are configured (SPEC §8;
# `_serve` in app/cli.py rewrites the host to 127.0.0.1), so CONTEXTD_HOST=0.0.0.0
# below takes effect only together with API keys (CONTEXTD_API_KEYS, or keys stored in
# the database by `contextd keys create`): without any the container runs and reports
# healthy but cannot be reached through a published port.
#
# Layout. A plain (non-editable) install: the wheel carries the migrations inside the
# package (app/db/migrations, see [tool.setuptools] in pyproject.toml) and the search
# vector's C loops (setup.py), so the runtime stage needs nothing but the venv. The
# builder alone has a C compiler.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder

ARG SRC_DIR=/srv/contextd
ARG VENV=/opt/venv
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=${VENV}/bin:${PATH}

# gcc for app/index/_vector.c (the image's Python ships its headers). setup.py
# makes the module optional, so the build checks below that it was built. Not pinned
# (DL3008): the base image fixes the Debian release, and any gcc of it builds the module.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv "${VENV}"
WORKDIR ${SRC_DIR}

# Dependencies first, in their own layer, read from pyproject.toml itself (no second
# list in the repository): source edits then reuse this layer. No extras: the dev
# tools and the embedded PostgreSQL stay out of the image.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The project itself, without dependencies (all installed above).
COPY README.md setup.py ./
COPY app/ app/
RUN pip install --no-deps . \
    && rm -rf build \
    && contextd --help > /dev/null \
    && python -I -c "from app.db.migrate import migrations_dir; assert (migrations_dir() / 'env.py').is_file()" \
    && python -I -c "import app.index._vector" \
    && python -I -c "from app.core.tokens.encodings import get_encoding; get_encoding('o200k_base'); get_encoding('cl100k_base')"


FROM ${PYTHON_IMAGE} AS runtime

ARG SRC_DIR=/srv/contextd
ARG VENV=/opt/venv
ARG APP_UID=10001

LABEL org.opencontainers.image.title="contextd" \
      org.opencontainers.image.description="A context service for LLM agents"

RUN groupadd --system --gid "${APP_UID}" contextd \
    && useradd --system --uid "${APP_UID}" --gid contextd --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin contextd

# The venv alone (see "Layout" above), at its build path (its scripts name it).
# Owned by root, read-only to the service user.
COPY --from=builder ${VENV} ${VENV}

ENV PATH=${VENV}/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CONTEXTD_HOST=0.0.0.0 \
    CONTEXTD_PORT=8080 \
    CONTEXTD_LOG_FORMAT=json

WORKDIR ${SRC_DIR}
USER ${APP_UID}:${APP_UID}

# 8080: the service (`serve`). 8081: `contextd worker`'s /healthz, /readyz and /metrics
# (CONTEXTD_WORKER_PORT); docker-compose.yml's worker health check probes it.
EXPOSE 8080 8081

# Liveness over the stdlib (the slim image has no curl). 127.0.0.1 works whether the
# server bound 0.0.0.0 (API keys set) or loopback only (no keys). `serve` migrates
# before it listens, hence the start period.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('CONTEXTD_PORT', '8080') + '/healthz', timeout=4)"]

ENTRYPOINT ["contextd"]
CMD ["serve"]
