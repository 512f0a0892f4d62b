#!/usr/bin/env bash
# louped in a PID namespace of its own, as in a pod with
# shareProcessNamespace: it and its target run under
# `unshare --pid --fork --mount-proc`, the target is attached by the pid the
# namespace sees, and the host's procfs is given as proc_root. The trace
# must name the target by both its host pid and its namespace pid, and hold
# its events (the shim's spans come only from it). Without proc_root louped
# refuses to start, and tracectl's embedded engine to attach, saying why.
set -euo pipefail
louped=$1 tracectl=$2 app=$3
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root for PID namespaces and BPF"; exit 77
fi
work=$(mktemp -d)
mkdir "$work/hostproc"
mount --bind /proc "$work/hostproc"
trap 'umount "$work/hostproc" 2>/dev/null; rm -rf "$work"' EXIT

# Everything below runs in the new namespace; the bind mount of the host's
# /proc made before it stays the host's.
timeout 60 unshare --pid --fork --mount-proc bash -c '
  set -euo pipefail
  louped=$1 tracectl=$2 app=$3 work=$4
  "$app" 60 > "$work/app.out" &
  until grep -q ready "$work/app.out"; do sleep 0.05; done
  ns_pid=$(awk "{print \$2}" "$work/app.out")
  echo "$ns_pid" > "$work/ns_pid"
  # Its host pid: the host procfs entry whose innermost NSpid is ns_pid.
  for status in "$work"/hostproc/[0-9]*/status; do
    if grep -q "^Name:.loupe-demo-app" "$status" 2>/dev/null &&
       [ "$(awk "/^NSpid:/ {print \$NF}" "$status")" = "$ns_pid" ]; then
      basename "$(dirname "$status")" > "$work/host_pid"
    fi
  done
  set +e
  "$louped" --socket "$work/bare.sock" --output-dir "$work/bare" > "$work/bare.log" 2>&1
  echo $? > "$work/bare.code"
  "$tracectl" --socket "$work/none.sock" attach "$ns_pid" --duration 1s -o "$work/embedded" \
    > "$work/embedded.log" 2>&1
  echo $? > "$work/embedded.code"
  set -e
  "$louped" --socket "$work/louped.sock" --output-dir "$work/traces" \
    --proc-root "$work/hostproc" > "$work/louped.log" 2>&1 &
  daemon=$!
  until [ -S "$work/louped.sock" ]; do kill -0 $daemon; sleep 0.05; done
  "$tracectl" --socket "$work/louped.sock" attach "$ns_pid" --duration 1s -q > "$work/attach.out" 2>&1
  echo $? > "$work/attach.code"
  kill -TERM $daemon; wait $daemon
' _ "$louped" "$tracectl" "$app" "$work" || fail "the namespace script failed: $(cat "$work/louped.log" 2>/dev/null)"

[ "$(cat "$work/bare.code")" != 0 ] || fail "louped in a PID namespace started without proc_root"
grep -q "runs in a PID namespace of its own but proc_root is /proc" "$work/bare.log" \
  || fail "$(cat "$work/bare.log")"
[ "$(cat "$work/embedded.code")" = 2 ] \
  && grep -q "runs in a PID namespace of its own" "$work/embedded.log" \
  || fail "embedded tracectl in a PID namespace: $(cat "$work/embedded.log")"
[ "$(cat "$work/attach.code")" = 0 ] || fail "attach by namespace pid: $(cat "$work/attach.out")"
ns_pid=$(cat "$work/ns_pid") host_pid=$(cat "$work/host_pid")
[ -n "$host_pid" ] && [ "$host_pid" != "$ns_pid" ] || fail "host pid '$host_pid', namespace pid $ns_pid"
"$tracectl" verify "$work/traces" > "$work/verify.out" || fail "$(cat "$work/verify.out")"
grep -q "processes: $host_pid(loupe-demo-app, pid $ns_pid in its namespace)$" "$work/verify.out" \
  || fail "want host pid $host_pid and namespace pid $ns_pid: $(cat "$work/verify.out")"
grep -q "span_begin=[1-9]" "$work/verify.out" || fail "the target's spans are missing: $(cat "$work/verify.out")"
grep -q "sched_switch=[1-9]" "$work/verify.out" || fail "no sched events: $(cat "$work/verify.out")"
echo "pid namespace: louped in its own PID namespace traces by namespace pid, records both pids"
