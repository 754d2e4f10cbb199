#!/usr/bin/env bash
# A new user's first command, cold (BENCHMARKS.md "A new user's first command"): for each
# commit given, a fresh clone and an empty target directory, then the README's first command
# (`cargo run --example quickstart`, a throwaway redis-server) timed to its exit; prints the
# wall time and the crates compiled (cargo's "Compiling" lines). Crates already downloaded
# (~/.cargo/registry) are not fetched again: the time is compiling and running.
# Usage: scripts/quickstart_cold.sh COMMIT [COMMIT...]
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
echo "| commit | crates compiled | wall (s) |"
echo "|---|---|---|"
for commit in "$@"; do
    dir=$(mktemp -d)
    git clone -q "$repo" "$dir/src"
    git -C "$dir/src" checkout -q "$commit"
    start=$(date +%s.%N)
    (cd "$dir/src" && env -u REDIS_URL CARGO_TARGET_DIR="$dir/target" \
        cargo run --locked --example quickstart > "$dir/out" 2> "$dir/err")
    end=$(date +%s.%N)
    crates=$(grep -c '^ *Compiling ' "$dir/err" || true)
    printf '| %s | %s | %.0f |\n' "$(git -C "$dir/src" rev-parse --short HEAD)" "$crates" \
        "$(echo "$end - $start" | bc)"
    rm -rf "$dir"
done
