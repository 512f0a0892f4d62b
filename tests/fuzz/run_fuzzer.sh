#!/usr/bin/env bash
# run_fuzzer.sh BINARY WORK_CORPUS SEED_DIR SECONDS: fuzzes for a bounded time,
# keeping what it learns in WORK_CORPUS; any crash fails the test.
set -euo pipefail
binary=$1 work=$2 seeds=$3 seconds=$4
mkdir -p "$work"
exec "$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$work/" "$work" "$seeds"
