# Every target bootstraps .venv from pyproject.toml, so each works on a fresh machine with Python 3.11+.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: serve demo docs test test-python test-ts test-deploy chaos-deploy lint typecheck bench bench-model fuzz clean

$(STAMP): pyproject.toml setup.py app/index/_vector.c clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]" -e "./clients/python[agents,langchain]"
	touch $(STAMP)

serve: $(STAMP)  ## run the service (embedded PostgreSQL unless CONTEXTD_DATABASE_URL is set)
	$(BIN)/contextd serve

demo: $(STAMP)  ## the example agent against contextd and a scripted local model (no API key)
	$(BIN)/contextd demo

docs: $(STAMP)  ## regenerate docs/reference.md from the code (tests/test_docs.py checks it)
	$(BIN)/python docs/reference.py

# The suite leaves a core idle much of the time (it waits on the servers it starts), so
# mypy and the TypeScript client's tests run beside it; each one's output is printed
# whole when it ends, and any failure fails `make test`.
test: $(STAMP)  ## lint and the layering (lint-imports), then side by side: mypy, the whole test suite against a real PostgreSQL, the TypeScript client's tests
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(MAKE) --no-print-directory -j3 --output-sync=target typecheck test-ts test-python

# pytest-xdist: whole files per worker (a module's fixtures and servers stay in one
# process), each worker with its own databases; 2 for the 2 cores CI has. Files are
# handed out in collection order, where tests/conftest.py puts the slow ones first
# (xdist's default order, most tests first, left the longest files for the end).
# Bytecode is written: without it every worker and every server process a test starts
# compiles FastAPI, SQLAlchemy and the rest again.
PYTEST_WORKERS ?= 2

test-python: $(STAMP)  ## the Python test suite alone (pytest, its files spread over $(PYTEST_WORKERS) workers)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-ts: $(STAMP)  ## the TypeScript client: npm ci from the lock file, tsc --noEmit, its tests against a contextd it starts
	cd clients/typescript && npm ci --no-audit --no-fund && npm test

# The compose stack, built from the Dockerfile and run as docker-compose.yml says, with
# checks on loopback; everything it makes is removed after (deploy/smoke.sh says how).
test-deploy: $(STAMP)  ## build the image and smoke-test docker-compose.yml (docker, or podman installed with apt-get)
	bash deploy/smoke.sh

CHAOS_SECONDS ?= 120

chaos-deploy: $(STAMP)  ## the smoke test, then writers under container kills for $(CHAOS_SECONDS) s (deploy/chaos.py)
	bash deploy/smoke.sh --chaos $(CHAOS_SECONDS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

fuzz: $(STAMP)  ## the long schemathesis run (500 examples per operation, with and without a key)
	CONTEXTD_FUZZ_EXAMPLES=500 $(BIN)/pytest tests/process/test_schema_fuzz.py

bench-model: $(STAMP)  ## compaction through SmolLM2-135M on llama.cpp (not in `bench`; install: docs/compaction-model.md; LLAMA_PYTHON=venv/bin/python)
	$(BIN)/python bench/model_bench.py $(BENCH_MODEL_ARGS)

bench: $(STAMP)  ## the benchmarks of docs/measured.md, in order (~20 min; CONTEXTD_DATABASE_URL or embedded; pgbench on PATH)
	$(BIN)/python bench/agent_loop.py --quick
	$(BIN)/python bench/context_bench.py --repeat 40 --rounds 2
	$(BIN)/python bench/compaction_bench.py --control
	$(BIN)/python bench/load.py --agents 10,50,200 --duration 20
	$(BIN)/python bench/throughput.py --op append --workers 1,2 --clients 50 --duration 15 --pgbench-clients 10,50
	$(BIN)/python bench/growth_bench.py --stats none,analyze
	$(BIN)/python bench/vector_bench.py

# `make clean` works on this folder whatever the caller's (make -f, make -C) and removes
# fixed names only, so no variable given on the command line can point it elsewhere.
ROOT := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

clean:  ## remove the venv, caches and the embedded database (stopped first; refused while it runs and .venv is gone)
	@cd "$(ROOT)" && if [ -x .venv/bin/python ]; then .venv/bin/python -m app.db.embedded stop .contextd; \
	elif [ -f .contextd/pgdata/postmaster.pid ] && pid="$$(head -n 1 .contextd/pgdata/postmaster.pid)" && [ -n "$$pid" ] && \
	  { kill -0 "$$pid" 2>/dev/null || [ -d "/proc/$$pid" ]; }; then \
	  echo "the embedded PostgreSQL in .contextd is running and .venv is gone: stop it first" >&2; exit 1; fi
	cd "$(ROOT)" && rm -rf -- .venv .contextd .pytest_cache .mypy_cache .ruff_cache .hypothesis \
	  clients/typescript/node_modules clients/typescript/.build clients/typescript/dist
