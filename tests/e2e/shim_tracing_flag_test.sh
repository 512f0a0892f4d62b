#!/usr/bin/env bash
# loupe_tracing() turns true while a program is traced, also in one that
# uses only operations (its span emitters are dropped by the compiler).
set -euo pipefail
tracectl=$1 app=$2
source "$(dirname "$0")/privileged.sh"
export LOUPE_SOCKET=$work/no-louped.sock  # embedded
"$app" > "$work/app.out" &
app_pid=$!
trap 'kill $app_pid 2>/dev/null || true; rm -rf "$work"' EXIT
until grep -q ready "$work/app.out"; do sleep 0.05; done
"$tracectl" attach "$app_pid" --duration 2s --sources shim -o "$work/trace" -q > "$work/attach.out" 2>&1 \
  || fail "attach: $(cat "$work/attach.out")"
wait "$app_pid" || fail "the program never saw loupe_tracing(): $(cat "$work/app.out")"
grep -q "traced after" "$work/app.out" || fail "$(cat "$work/app.out")"
echo "PASS: $(tail -1 "$work/app.out")"
