#!/usr/bin/env bash
# What attaching and detaching a session costs the traced service (root):
#   tests/bench/attach_stall.sh [build-dir]
# attach_stall_service serves back-to-back ~20 µs requests on THREADS
# workers that never block on their own; bpftrace (blocked_threads.bt)
# records every interval one of them spends blocked. For each case an
# embedded tracectl session attaches, traces DURATION and detaches, and the
# requests and blocked intervals are split into windows: before (a quiet
# stretch as long as the attach), attach (tracectl start → "tracing"),
# traced, and detach (end of tracing → tracectl's exit). Printed per case
# and window: requests, wall p99 and max, the most time one thread spent
# blocked, the attach time, from tracectl's start to the trace's first
# event and to the first request that saw the shim's probes enabled, and
# the window's longest blocked interval with the kernel frames it slept in
# and its waker. Cases: the shim's emitters alone (a few
# sites), and the same with 200 uprobes on the requests' path, each with
# multi-uprobe links and with one link per site (LINKS="multi per-site").
# TRACECTL=path runs another tracectl than the build's (a copy stays stable
# while the tree is rebuilt); VARIANTS="before=path after=path ..." runs
# every case with each of those instead, interleaved, as "<case>@before":
# before/after in one run. Each repeat ends with the reference: the 200
# uprobes placed by bpftrace (BPFTRACE=0 leaves it out).
set -euo pipefail
build=${1:-build}
tracectl=${TRACECTL:-$build/tools/tracectl/tracectl}
variants=${VARIANTS:-"=$tracectl"}
links_kinds=${LINKS:-multi per-site}
service=$build/tests/bench/attach_stall_service
blocked_script=$(dirname "$0")/blocked_threads.bt
threads=${THREADS:-2}
duration=${DURATION:-2s}
repeats=${REPEATS:-3}
duration_ms=$(python3 -c "print(int(float('${duration%s}') * 1000))")
tmp=$(mktemp -d)
export LOUPE_SOCKET=$tmp/no-louped.sock  # embedded: the tracer is tracectl itself
trap 'kill $(jobs -p) 2> /dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
command -v python3 > /dev/null || { echo "python3 is needed"; exit 1; }
command -v bpftrace > /dev/null || { echo "bpftrace is needed"; exit 1; }

# CLOCK_MONOTONIC (what the service and bpftrace use) = realtime - offset;
# bash's own microsecond clock stamps lines without a process per line.
offset=$(python3 -c 'import time
print(time.clock_gettime_ns(time.CLOCK_REALTIME) - time.clock_gettime_ns(time.CLOCK_MONOTONIC))')
now() { echo $(("${EPOCHREALTIME/./}000" - offset)); }

# trace TRACER PID OUT [tracectl attach options...]: one session that says
# "tracing pids" once every probe is in. TRACER "bpftrace" is the reference:
# the same 200 uprobes through bpftrace (one perf-event link per site).
trace() {
  local tracer=$1 pid=$2 out=$3; shift 3
  if [ "$tracer" = bpftrace ]; then
    bpftrace -p "$pid" -e "BEGIN { printf(\"tracing pids $pid\\n\"); }
      uprobe:$(realpath "$service"):stall_site_* { @hits = count(); }
      interval:ms:${duration_ms} { exit(); }"
  else
    "$tracer" attach -d "$duration" -o "$out" "$@" "$pid"
  fi
}

# run_case TRACECTL NAME REPEAT [tracectl attach options...]
run_case() {
  local tracer=$1 name=$2 repeat=$3; shift 3
  local out=$tmp/${name//\//-}.$repeat
  grep -qxF "$name" "$tmp/cases" 2> /dev/null || echo "$name" >> "$tmp/cases"
  coproc SERVICE { "$service" "$out.requests" "$threads"; }
  local pid
  read -r _ pid <&"${SERVICE[0]}"
  stdbuf -oL bpftrace "$blocked_script" "$pid" > "$out.blocked" 2>&1 &
  local watcher=$!
  sleep 3  # bpftrace starts, then a quiet stretch: the baseline
  local start; start=$(now)
  trace "$tracer" "$pid" "$out.trace" "$@" 2>&1 |
    while IFS= read -r line; do  # no $(now): a fork per line lags behind a burst of lines
      echo "$(("${EPOCHREALTIME/./}000" - offset)) $line"
    done > "$out.log" || true  # INCOMPLETE is fine here
  local end; end=$(now)
  sleep 0.5
  kill -INT "$watcher"  # bpftrace 0.17 at times never ends on SIGINT: then KILL
  for _ in $(seq 1 50); do kill -0 "$watcher" 2> /dev/null && sleep 0.1; done
  kill -KILL "$watcher" 2> /dev/null || true; wait "$watcher" || true
  eval "exec ${SERVICE[1]}>&-"
  wait "$SERVICE_PID"
  local tracing; tracing=$(awk '/tracing pids/ {print $1; exit}' "$out.log")
  [ -n "$tracing" ] || { echo "$name: tracectl never said it was tracing:"; cat "$out.log"; exit 1; }
  local first; first=$(awk '/^first_traced/ {print $2}' "$out.requests")
  # The trace's first event (time order; the processes' descriptions aside).
  local first_event; first_event=$("$tracer" export --format json -o - "$out.trace" 2> /dev/null |
    python3 -c 'import json, sys
for line in sys.stdin:
    event = json.loads(line)
    if event["kind"] not in ("process_info", "thread_info"):
        print(event["time_ns"]); break
else:
    print(0)' || true)  # tracectl dies of SIGPIPE once the first event is read
  echo "$start $tracing $end $first $first_event" > "$out.windows"
}

sites=()
for i in $(seq 0 199); do sites+=(--uprobe "$(realpath "$service"):stall_site_$(printf %03d "$i")"); done

# Each case with multi-uprobe links (the default where the kernel has them)
# and with one perf-event link per site (LOUPE_UPROBE_MULTI=0), alternating.
for repeat in $(seq 1 "$repeats"); do
  for links in $links_kinds; do
    multi=1; [ "$links" = multi ] || multi=0
    for variant in $variants; do
      tracer=${variant#*=} suffix=${variant%%=*}
      suffix=${suffix:+@$suffix}
      LOUPE_UPROBE_MULTI=$multi run_case "$tracer" "shim/$links$suffix" "$repeat" --sources sched,cpu,shim
      LOUPE_UPROBE_MULTI=$multi run_case "$tracer" "shim+200uprobes/$links$suffix" "$repeat" \
        --sources sched,cpu,shim "${sites[@]}"
    done
  done
  [ "${BPFTRACE:-1}" = 0 ] || run_case bpftrace "bpftrace-200uprobes" "$repeat"
done

python3 - "$tmp" "$repeats" "$duration" <<'EOF'
import collections, sys
tmp, repeats = sys.argv[1], int(sys.argv[2])
duration_ns = int(float(sys.argv[3].rstrip("s")) * 1e9)

def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else 0

# The frames of a blocked interval's kernel stack that only say it slept.
SCHEDULING = ("__traceiter_", "__schedule", "schedule", "rwsem_down_", "__mutex_lock")

def cause(interval):
    """The longest interval's length, its first frames that say why, its waker."""
    tid, since, until, waker, *frames = interval
    return f"{(until - since) / 1e6:.2f} ms in {' < '.join(frames[:2]) or '?'}, {waker}"

def overlap(lo, hi, a, b):
    return max(0, min(hi, b) - max(lo, a))

print(f"{'case':<32} {'window':<7} {'ms':>6} {'requests':>9} {'p99 us':>8} {'max us':>8} "
      f"{'blocked ms (worst thread)':>26} {'attach ms':>10} {'first event ms':>15} {'shim live ms':>13}  "
      f"longest blocked interval of the window (over 0.3 ms)")
for name in sorted(open(f"{tmp}/cases").read().split()):
    for repeat in range(1, repeats + 1):
        base = f"{tmp}/{name.replace('/', '-')}.{repeat}"
        start, tracing, end, first, first_event = map(int, open(base + ".windows").read().split())
        attach_ns = tracing - start
        # Tracing ends `duration` after "tracing"; tracectl's exit ends the detach.
        windows = {"before": (start - attach_ns, start), "attach": (start, tracing),
                   "traced": (tracing, tracing + duration_ns), "detach": (tracing + duration_ns, end)}
        requests = []
        for line in open(base + ".requests"):
            if not line.startswith("first_traced"):
                tid, begin, wall = map(int, line.split())
                requests.append((begin, begin + wall))
        blocked = []  # [tid, since, until, "woken by WAKER", kernel frames...]
        for line in open(base + ".blocked"):
            if line.startswith("blocked "):
                _, tid, since, until, waker = line.split(maxsplit=4)
                blocked.append([int(tid), int(since), int(until), f"woken by {waker.strip()}"])
            elif line.startswith(" ") and line.strip() and blocked:
                frame = line.strip().split("+")[0]
                if not frame.startswith(SCHEDULING):
                    blocked[-1].append(frame)
        for window, (lo, hi) in windows.items():
            walls = [b - a for a, b in requests if a < hi and b > lo]
            per_thread = collections.Counter()
            longest = None
            for interval in blocked:
                tid, since, until = interval[:3]
                per_thread[tid] += overlap(lo, hi, since, until)
                if overlap(lo, hi, since, until) > 300_000 and (
                        longest is None or until - since > longest[2] - longest[1]):
                    longest = interval
            first_ms = f"{(first - start) / 1e6:.0f}" if first else "never"
            first_event_ms = f"{(first_event - start) / 1e6:.0f}" if first_event else "none"
            print(f"{name:<32} {window:<7} {(hi - lo) / 1e6:>6.0f} {len(walls):>9} "
                  f"{percentile(walls, 0.99) / 1e3:>8.0f} {max(walls, default=0) / 1e3:>8.0f} "
                  f"{max(per_thread.values(), default=0) / 1e6:>26.2f} {attach_ns / 1e6:>10.0f} "
                  f"{first_event_ms:>15} {first_ms:>13}  {cause(longest) if longest else ''}")
EOF
