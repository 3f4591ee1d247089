#!/bin/sh
# Profile the two hot paths under concurrency: py-spy samples every process of
# bench/throughput.py (the load generator and the `contextd serve` it starts) and
# writes collapsed stacks, one file per path, then prints the top functions of the
# server by inclusive share.
#
#   bench/profile.sh [out-dir] [workers]      (CONTEXTD_DATABASE_URL: the server to use)
#
# py-spy is on PyPI (`.venv/bin/pip install py-spy`); it needs ptrace (root, or
# kernel.yama.ptrace_scope=0). Samples of threads waiting on the GIL or a lock
# are not idle to py-spy: on a loaded machine the shares lean toward waiting.
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/contextd-profile}
WORKERS=${2:-1}
PY=${PYTHON:-.venv/bin/python}
SPY=${PYSPY:-.venv/bin/py-spy}
mkdir -p "$OUT"
for op in append context; do
    "$SPY" record --subprocesses --format raw --rate 200 -o "$OUT/$op.txt" -- \
        "$PY" bench/throughput.py --op "$op" --workers "$WORKERS" --clients 20 \
        --duration 15 --warmup 3 --pgbench-clients ''
    echo "== $op: top of the server's stacks ($OUT/$op.txt)"
    "$PY" bench/profile_top.py "$OUT/$op.txt" --match "app.cli serve" --top 40
done
