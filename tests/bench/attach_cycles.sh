#!/usr/bin/env bash
# How long louped takes to attach and to detach a session, as a user waits
# for it (root):
#   tests/bench/attach_cycles.sh LOUPED TRACECTL [CYCLES] [APP]
# A louped of its own on a private socket, a demo app (the shim's 8 probe
# sites), CYCLES `tracectl attach --detach` + `tracectl detach` one after
# another; prints the mean of each. Figures only.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 LOUPED TRACECTL [CYCLES] [APP]" >&2; exit 2; }
louped=$1 tracectl=$2 cycles=${3:-20}
[ "$cycles" -ge 1 ] || { echo "CYCLES must be at least 1" >&2; exit 2; }
app=${4:-$(dirname "$tracectl")/../../tests/testprogs/loupe-demo-app}
work=$(mktemp -d)
sock=$work/louped.sock
"$louped" --socket "$sock" --output-dir "$work/traces" --rotation-period-s 0 > "$work/louped.log" 2>&1 &
daemon=$!
"$app" 3600 > "$work/app.out" &
target=$!
trap 'kill $target $daemon 2> /dev/null || true; wait 2> /dev/null || true; rm -rf "$work"' EXIT
waited=0
until [ -S "$sock" ] && grep -q ready "$work/app.out"; do
  sleep 0.05; waited=$((waited + 1))
  [ "$waited" -lt 200 ] || { echo "louped or the app never started: $(cat "$work/louped.log")" >&2; exit 1; }
done
ms() { echo $(( $(date +%s%N) / 1000000 )); }
for i in $(seq 1 "$cycles"); do
  t0=$(ms)
  "$tracectl" --socket "$sock" attach "$target" --session-id "c$i" --detach -q > /dev/null
  t1=$(ms)
  "$tracectl" --socket "$sock" detach "c$i" > /dev/null
  t2=$(ms)
  echo "$((t1 - t0)) $((t2 - t1))" >> "$work/times"
done
awk '{attach += $1; detach += $2; n++}
     END {printf "%d cycles: attach %.0f ms, detach %.0f ms (means)\n", n, attach / n, detach / n}' \
  "$work/times"
