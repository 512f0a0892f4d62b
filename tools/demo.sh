#!/usr/bin/env bash
# The main job end to end: installs what it needs, builds, starts a small
# multi-threaded demo service, traces it for a few seconds with
# `tracectl attach`, verifies the trace and reports on it. Run as root (BPF).
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh
out=${1:-loupe-traces/demo}
rm -rf "$out"

./build/tests/testprogs/loupe-demo-app 30 > /tmp/loupe-demo-app.$$ &
app=$!
trap 'kill $app 2>/dev/null || true; rm -f /tmp/loupe-demo-app.$$' EXIT
until grep -q ready /tmp/loupe-demo-app.$$; do sleep 0.1; done

echo "tracing loupe-demo-app (pid $app) for 5 s"
./build/tools/tracectl/tracectl attach "$app" --duration 5s --output "$out"
./build/tools/tracectl/tracectl verify "$out"
./build/tools/tracectl/tracectl report "$out" --top 5
