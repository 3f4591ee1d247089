# contextd image: `docker build -t contextd .`, or `docker compose up` (see docker-compose.yml).
#
# Set CONTEXTD_DATABASE_URL (compose does). The embedded PostgreSQL (the `embedded`
# extra) is not installed in the image: without a URL `contextd` exits with status 2
# and "no CONTEXTD_DATABASE_URL is set and the embedded PostgreSQL is not installed".
# The app refuses to listen beyond loopback when no API keys are configured (SPEC §8;
# `_serve` in app/cli.py rewrites the host to 127.0.0.1), so CONTEXTD_HOST=0.0.0.0
# below takes effect only together with CONTEXTD_API_KEYS: without keys the container
# runs and reports healthy but cannot be reached through a published port.
#
# Layout. `app/db.py` finds `alembic.ini` and `migrations/` next to the *imported*
# `app` package (REPO_ROOT = parent of app/). A plain `pip install .` puts `app`
# into site-packages without them (they are not package data), so `contextd
# migrate`/`serve` would fail with "Path doesn't exist: .../site-packages/migrations".
# The project therefore lives at /srv/contextd and is installed into the venv in
# editable mode: the venv's finder maps `app` to /srv/contextd/app, so alembic.ini and
# migrations/ sit beside it. The finder records that absolute path, so builder and
# runtime must use the same SRC_DIR and VENV paths.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder

ARG SRC_DIR=/srv/contextd
ARG VENV=/opt/venv
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=${VENV}/bin:${PATH}

RUN python -m venv "${VENV}"
WORKDIR ${SRC_DIR}

# Dependencies first, in their own layer, resolved from pyproject.toml alone (no
# separate requirements list): install the project around an empty `app` package,
# then drop the project itself and keep its dependencies. Source edits then reuse
# this layer. No extras: the dev tools and the embedded PostgreSQL stay out of the image.
COPY pyproject.toml README.md ./
RUN mkdir app \
    && touch app/__init__.py \
    && pip install . \
    && pip uninstall --yes contextd \
    && rm -rf app build ./*.egg-info

# The project itself, without dependencies (all installed above).
COPY alembic.ini ./
COPY migrations/ migrations/
COPY app/ app/
RUN pip install --no-deps --editable . \
    && rm -rf build \
    && python -m compileall -q app migrations \
    && contextd --help > /dev/null


FROM ${PYTHON_IMAGE} AS runtime

ARG SRC_DIR=/srv/contextd
ARG VENV=/opt/venv
ARG APP_UID=10001

LABEL org.opencontainers.image.title="contextd" \
      org.opencontainers.image.description="A context service for LLM agents"

RUN groupadd --system --gid "${APP_UID}" contextd \
    && useradd --system --uid "${APP_UID}" --gid contextd --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin contextd

# Same paths as in the builder (see "Layout" above). Owned by root, read-only to
# the service user.
COPY --from=builder ${VENV} ${VENV}
COPY --from=builder ${SRC_DIR} ${SRC_DIR}

ENV PATH=${VENV}/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CONTEXTD_HOST=0.0.0.0 \
    CONTEXTD_PORT=8080 \
    CONTEXTD_LOG_FORMAT=json

WORKDIR ${SRC_DIR}
USER ${APP_UID}:${APP_UID}

EXPOSE 8080

# Liveness over the stdlib (the slim image has no curl). 127.0.0.1 works whether the
# server bound 0.0.0.0 (API keys set) or loopback only (no keys). `serve` migrates
# before it listens, hence the start period.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('CONTEXTD_PORT', '8080') + '/healthz', timeout=4)"]

ENTRYPOINT ["contextd"]
CMD ["serve"]
