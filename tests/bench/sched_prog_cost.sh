#!/usr/bin/env bash
# What the scheduler programs cost per run, from the kernel's own accounting
# (kernel.bpf_stats_enabled), for tracectl builds alternated in one run (root):
#   tests/bench/sched_prog_cost.sh [build-dir] [rounds]   # VARIANTS="old=path new=path"
# Each round traces the ping-pong (bench_work pingpong, ~50 k switches a
# second) with `--sources sched` and default off-CPU stacks under each
# build, and prints the switch and wakeup programs' runs and ns per run.
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
variants=${VARIANTS:-"this=$build/tools/tracectl/tracectl"}
source "$(dirname "$0")/prog_stats.sh"
tmp=$(mktemp -d)
export LOUPE_SOCKET=$tmp/no-louped.sock  # embedded: the programs are tracectl's own
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$tmp"' EXIT
sysctl -q kernel.bpf_stats_enabled=1

per_run() { awk '{ if ($1 > 0) printf "%d runs, %.0f ns/run", $1, $2 / $1; else printf "no runs" }'; }
for round in $(seq 1 "$rounds"); do
  for variant in $variants; do
    name=${variant%%=*}
    "$build/tests/testprogs/bench_work" pingpong 200000 1.5 > /dev/null &
    app=$!
    "${variant#*=}" attach -q --sources sched -d 3s -o "$tmp/$name" "$app" > /dev/null 2>&1 &
    tracer=$!
    sleep 2.5  # loaded and attached: the programs are the tracer's until it exits
    switch=$(prog_stats "$tracer" handle_sched_switch | per_run)
    wakeup=$(prog_stats "$tracer" "handle_sched_wakeup_(pcnt|irqd)" | per_run)
    wait "$tracer" || true
    kill "$app" 2> /dev/null || true
    wait "$app" 2> /dev/null || true
    rm -rf "${tmp:?}/$name"
    echo "round $round $name: switch $switch; wakeup $wakeup"
  done
done
