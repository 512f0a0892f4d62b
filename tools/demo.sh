#!/usr/bin/env bash
# The main job end to end on a demo workload: installs what it needs, builds,
# writes a trace of the built-in synthetic workload and verifies it.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh
out=${1:-loupe-traces}
rm -rf "$out/demo"
./build/tools/tracectl/tracectl demo --output "$out/demo"
./build/tools/tracectl/tracectl verify "$out/demo"
