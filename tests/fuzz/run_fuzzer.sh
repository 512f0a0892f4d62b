#!/usr/bin/env bash
# run_fuzzer.sh BINARY WORK_CORPUS SEED_DIR SECONDS [RSS_MB [MALLOC_MB]]:
# fuzzes for a bounded time, keeping what it learns in WORK_CORPUS; any crash
# fails the test. RSS_MB (2048 by default) bounds the process, MALLOC_MB (as
# much by default) any single allocation: a reader that allocates what its
# input claims, rather than what it holds, fails the run.
set -euo pipefail
binary=$1 work=$2 seeds=$3 seconds=$4 rss_mb=${5:-2048} malloc_mb=${6:-${5:-2048}}
mkdir -p "$work"
exec "$binary" -max_total_time="$seconds" -rss_limit_mb="$rss_mb" -malloc_limit_mb="$malloc_mb" \
  -timeout=10 -artifact_prefix="$work/" "$work" "$seeds"
