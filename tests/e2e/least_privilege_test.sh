#!/usr/bin/env bash
# The systemd unit, checked and lived by: `systemd-analyze verify` accepts
# it; louped run as an unprivileged user with exactly the unit's ambient
# capabilities (and its real-time limit, where root here may raise it)
# traces a root-owned process (sched, CPU samples and the shim's uprobes,
# placed at real-time priority when the limit allows, and saying which)
# and tells systemd it is ready; without CAP_BPF or
# CAP_PERFMON it refuses to start, naming the capability; without
# CAP_SYS_ADMIN it says uprobes are off and still traces.
set -euo pipefail
louped=$1 tracectl=$2 app=$3 source_dir=$4
unit="$source_dir/deploy/systemd/louped.service"
fail() { echo "FAIL: $*"; [ -f "${log:-}" ] && tail -n 20 "$log"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to switch users and grant capabilities"; exit 77
fi
work=$(mktemp -d)
chmod 755 "$work"
app_pid= daemon=
trap 'kill $app_pid $daemon 2>/dev/null || true; rm -rf "$work"' EXIT

# The unit as systemd reads it (with ExecStart pointing at this build).
sed "s#/usr/bin/louped#$louped#" "$unit" > "$work/louped.service"
systemd-analyze verify "$work/louped.service" > "$work/verify.out" 2>&1 \
  || fail "systemd-analyze verify: $(cat "$work/verify.out")"
[ ! -s "$work/verify.out" ] || fail "systemd-analyze verify complains: $(cat "$work/verify.out")"
for key in Type=notify User=loupe NoNewPrivileges=yes ProtectSystem=strict ProtectHome= \
           PrivateTmp=yes StateDirectory=loupe RuntimeDirectory=loupe Restart=; do
  grep -q "^$key" "$unit" || fail "the unit lacks $key"
done

ambient=$(sed -n 's/^AmbientCapabilities=//p' "$unit")
bounding=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit")
[ -n "$ambient" ] && [ "$ambient" = "$bounding" ] \
  || fail "AmbientCapabilities ($ambient) and CapabilityBoundingSet ($bounding) differ"
# "CAP_BPF CAP_PERFMON" -> "+bpf,+perfmon", setpriv's spelling.
as_setpriv() {
  local out=
  for cap in "$@"; do cap=${cap#CAP_}; out+="${out:+,}+${cap,,}"; done
  echo "$out"
}
# shellcheck disable=SC2086
all_caps=$(as_setpriv $ambient)
rtprio=$(sed -n 's/^LimitRTPRIO=//p' "$unit")
[ "$rtprio" = 1 ] || fail "the unit's LimitRTPRIO is '$rtprio', not 1"
# systemd sets the limit as PID 1; here raising it takes CAP_SYS_RESOURCE,
# which some machines' root lacks. Without it louped runs at the limit it
# inherits, and must say that it placed the sites at normal priority.
limits=(prlimit --rtprio="$rtprio:$rtprio")
placed="placed at real-time priority"
if ! "${limits[@]}" true 2> /dev/null; then
  echo "note: root here cannot raise RLIMIT_RTPRIO (no CAP_SYS_RESOURCE): louped runs without the unit's LimitRTPRIO"
  limits=(prlimit --rtprio="$(ulimit -Hr)")
fi
# What louped's user can get under that limit decides what it must say.
if ! "${limits[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
     --bounding-set=-all chrt -f 1 true 2> /dev/null; then
  placed="placed at normal priority (neither CAP_SYS_NICE nor an RLIMIT_RTPRIO of 1"
fi

mkdir "$work/run" "$work/traces" && chown 65534:65534 "$work/run" "$work/traces"
sock="$work/run/louped.sock"
run_louped() {  # caps, log file; louped as uid 65534 with exactly those capabilities
  log=$2
  NOTIFY_SOCKET="$work/notify" "${limits[@]}" \
    setpriv --reuid=65534 --regid=65534 --clear-groups \
    --inh-caps="-all,$1" --ambient-caps="-all,$1" --bounding-set="-all,$1" \
    "$louped" --socket "$sock" --output-dir "$work/traces" --rotation-period-s 0 > "$log" 2>&1 &
  daemon=$!
}

"$app" 120 > "$work/app.out" &
app_pid=$!
until grep -q ready "$work/app.out"; do sleep 0.05; done

# systemd's side of Type=notify: a datagram socket that records what arrives.
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); s.settimeout(30)
open(sys.argv[2], "w").write(s.recv(4096).decode())
' "$work/notify" "$work/notified" &
listener=$!
until [ -S "$work/notify" ]; do sleep 0.05; done
chmod 777 "$work/notify"

run_louped "$all_caps" "$work/louped.log"
until [ -S "$sock" ]; do
  kill -0 "$daemon" 2>/dev/null || fail "louped with the unit's capabilities exited"
  sleep 0.05
done
wait "$listener" || fail "louped never notified systemd"
grep -q "READY=1" "$work/notified" || fail "notification without READY=1: $(cat "$work/notified")"
grep -q "missing capability" "$work/louped.log" && fail "louped lacks something: $(cat "$work/louped.log")"
"$tracectl" --socket "$sock" attach "$app_pid" --duration 2s -q -o "$work/traces/full" \
  > "$work/attach.out" 2>&1 || fail "attach as unprivileged louped: $(cat "$work/attach.out")"
grep -q "probe site(s) attached" "$work/attach.out" || fail "no shim probes: $(cat "$work/attach.out")"
grep -q "warning" "$work/attach.out" && fail "attach warned: $(cat "$work/attach.out")"
"$tracectl" verify "$work/traces/full" > "$work/verify.txt" || fail "$(cat "$work/verify.txt")"
for kind in sched_switch= cpu_sample= span_begin=; do
  grep -q "$kind" "$work/verify.txt" || fail "no $kind in the trace: $(cat "$work/verify.txt")"
done
"$tracectl" verify --json "$work/traces/full" > "$work/verify.json" || fail "$(cat "$work/verify.json")"
grep -qF "$placed" "$work/verify.json" || fail "the trace's uprobes feature does not say '$placed': $(cat "$work/verify.json")"
kill -TERM "$daemon"; wait "$daemon" || fail "louped exited $? on SIGTERM"; daemon=
echo "least privilege: louped as an unprivileged user with the unit's capabilities traces"

for required in CAP_BPF CAP_PERFMON; do
  # shellcheck disable=SC2086
  fewer=$(as_setpriv $(echo $ambient | tr ' ' '\n' | grep -vx "$required"))
  run_louped "$fewer" "$work/without.log"
  set +e; wait "$daemon"; code=$?; set -e; daemon=
  [ "$code" != 0 ] || fail "louped started without $required"
  grep -q "missing capability $required: " "$work/without.log" \
    || fail "without $required: $(cat "$work/without.log")"
  [ -S "$sock" ] && fail "louped without $required left a socket"
done
echo "least privilege: without CAP_BPF or CAP_PERFMON louped refuses to start and says why"

# shellcheck disable=SC2086
no_admin=$(as_setpriv $(echo $ambient | tr ' ' '\n' | grep -vx CAP_SYS_ADMIN))
run_louped "$no_admin" "$work/no_admin.log"
until [ -S "$sock" ]; do sleep 0.05; done
grep -q "missing capability CAP_SYS_ADMIN: .*uprobes, USDT and the shim's probes cannot be attached" \
  "$work/no_admin.log" || fail "$(cat "$work/no_admin.log")"
"$tracectl" --socket "$sock" attach "$app_pid" --duration 1s -q -o "$work/traces/no_admin" \
  > /dev/null 2>&1 || true
"$tracectl" verify "$work/traces/no_admin" | grep -q "sched_switch=" || fail "no sched events without CAP_SYS_ADMIN"
kill -TERM "$daemon"; wait "$daemon" || true; daemon=
echo "least privilege: all checks passed"
