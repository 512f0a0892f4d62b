#!/usr/bin/env bash
# Return probes never kill their target. The kernel's return probe swaps
# the return address on the stack for its trampoline: a C++ exception
# unwinding through the call finds no frame info there (std::terminate),
# and Go's runtime, which reads return addresses when it grows or scans a
# goroutine's stack, dies on it ("fatal error: unknown caller pc").
# - The returns are probed at the function's own return instructions, in
#   C++ and in a C library that calls back into C++ alike: every call that
#   returned is seen to, exactly, and each call an exception left ends
#   where it was caught (__cxa_begin_catch), marked unwound; so does each
#   call a longjmp left, at the jump (glibc's siglongjmp, __longjmp_chk),
#   and each call a Rust panic left, where catch_unwind caught it.
# - Go: refused, with a note in the trace; an entry probe still works.
set -euo pipefail
tracectl=$1 throw_through=$2 source=$3 longjmp_through=$4 longjmp_through_chk=$5
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi
command -v go > /dev/null || fail "go is not installed (golang-go)"
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2> /dev/null; rm -rf "$work"' EXIT
export LOUPE_SOCKET=$work/no-louped.sock  # embedded
count() { grep -o "$1=[0-9]*" "$2" | cut -d= -f2 || echo 0; }

# traced NAME PROGRAM CALLS PROBE...: runs PROGRAM CALLS (it waits for a
# line, makes its calls, prints "done ..."), traced with the probes from
# before its first call to after its last; it must live through it.
traced() {
  local name=$1 program=$2 calls=$3 specs=()
  shift 3
  for spec in "$@"; do specs+=(--uprobe "$spec"); done
  mkfifo "$work/$name.in"
  "$program" "$calls" < "$work/$name.in" > "$work/$name.out" 2>&1 &
  local app=$!
  pids+=($app)
  exec {app_in}> "$work/$name.in"
  until grep -q ready "$work/$name.out"; do sleep 0.05; done
  "$tracectl" attach "$app" --duration 3s --output "$work/$name" -q "${specs[@]}" \
    > "$work/$name.attach" 2>&1 &
  local tracer=$!
  until grep -q "probe site" "$work/$name.attach"; do sleep 0.05; done
  echo go >&"$app_in"
  wait "$tracer" || fail "attach with $*: $(cat "$work/$name.attach")"
  until grep -q done "$work/$name.out" || ! kill -0 "$app" 2> /dev/null; do sleep 0.05; done
  kill -0 "$app" 2> /dev/null || wait "$app" \
    || fail "the program died under $*: $(grep -m3 -E 'fatal|unexpected|terminate' "$work/$name.out")"
  "$tracectl" verify "$work/$name" > "$work/$name.verify" || fail "verify: $(cat "$work/$name.verify")"
}

# unwound NAME BY COUNTED: of the 3000 calls in NAME's trace, every third
# was left by BY ("exception", "longjmp"); the report counts them in its
# field COUNTED. 3000 entries, exactly 2000 returns and 1000 calls left,
# each timed; none left open.
unwound() {
  local name=$1
  grep -q "done 2000 1000" "$work/$name.out" || fail "the program: $(cat "$work/$name.out")"
  [ "$(count uprobe_entry "$work/$name.verify")" = 3000 ] || fail "entries: $(cat "$work/$name.verify")"
  [ "$(count uprobe_return "$work/$name.verify")" = 3000 ] || fail "returns: $(cat "$work/$name.verify")"
  "$tracectl" export --format json "$work/$name" -o "$work/$name.jsonl" > /dev/null
  "$tracectl" report "$work/$name" --json > "$work/$name.report.json"
  python3 - "$work/$name.jsonl" "$work/$name.report.json" "$2" "$3" << 'EOF'
import json, sys
by, counted = sys.argv[3], sys.argv[4]
returns = [e for e in map(json.loads, open(sys.argv[1])) if e["kind"] == "uprobe_return"]
unwound = sum(1 for e in returns if e.get("unwound") == by)
if unwound != 1000 or any(e.get("unwound") not in (None, by) for e in returns):
    sys.exit(f"FAIL: {unwound} of {len(returns)} returns left by {by}, not 1000")
if any(e.get("unwound") and e["duration_ns"] == 0 for e in returns):
    sys.exit("FAIL: a call left without its duration")
(kind,) = json.load(open(sys.argv[2]))["request_kinds"]
if (kind["count"], kind[counted], kind["unpaired"]["begins"]) != (3000, 1000, 0):
    sys.exit(f"FAIL: the report's calls: {kind['count']}, {kind[counted]} {counted}, "
             f"{kind['unpaired']['begins']} begun without an end")
EOF
}

# Every third call left by an exception, with a return probe on the
# throwing function or on the C library's that runs it.
for probe in "$throw_through:_Z14handle_requestl%return" "libcallback_lib:run_callback%return"; do
  traced cpp "$throw_through" 3000 "$probe"
  unwound cpp exception unwound
  rm -rf "$work"/cpp*
done

# Every third call left by a longjmp, through siglongjmp and, fortified,
# __longjmp_chk.
for program in "$longjmp_through" "$longjmp_through_chk"; do
  traced c "$program" 3000 "$program:handle_request%return"
  unwound c longjmp longjmped
  rm -rf "$work"/c.* "$work/c"
done

# Every third call left by a Rust panic, caught by catch_unwind in main:
# optimized (cleanup called from main) and not (from do_catch, called from
# __rust_try, where the panic is caught).
command -v rustc > /dev/null || fail "rustc is not installed (rustc)"
for level in 2 0; do
  rustc -C opt-level=$level -g --edition 2021 -o "$work/panic_through" \
    "$source/tests/testprogs/panic_through.rs" || fail "rustc of tests/testprogs/panic_through.rs"
  traced rust "$work/panic_through" 3000 "$work/panic_through:handle%return"
  unwound rust exception unwound
  rm -rf "$work"/rust* "$work/panic_through"
done

# The unwinder itself: each throw runs through _Unwind_RaiseException. Its
# code has instructions the decoder does not know (CET's rdssp): the
# kernel's return probe would abort the program at its first throw, so it
# is not placed, and the trace says why.
traced unwinder "$throw_through" 3000 "libgcc_s:_Unwind_RaiseException%return" \
  "$throw_through:_Z14handle_requestl"
grep -q "done 2000 1000" "$work/unwinder.out" || fail "the program under the unwinder's probe: $(cat "$work/unwinder.out")"
grep -q "uprobe_return=" "$work/unwinder.verify" \
  || grep -q "note: --uprobe 'libgcc_s:_Unwind_RaiseException%return' .*not placed" "$work/unwinder.verify" \
  || fail "neither its returns nor why not: $(cat "$work/unwinder.verify")"

# Go: stacks that grow and a GC every few calls.
(cd "$source/tests/testprogs/go_stacks" &&
  GOCACHE=$work/gocache GOPATH=$work/gopath GOFLAGS=-mod=mod go build -o "$work/go_stacks" .) \
  || fail "go build of tests/testprogs/go_stacks"
# main.work's returns refused with a note; each call's entry once, though
# growing its stack restarts it at its first instruction, with its
# argument from Go's registers.
traced go "$work/go_stacks" 4000 "$work/go_stacks:main.work%return" "$work/go_stacks:main.work(1)"
grep -q "done 4000" "$work/go.out" || fail "the Go program did not finish: $(cat "$work/go.out")"
grep -q "note: --uprobe '$work/go_stacks:main.work%return' .*is a Go program: a return probe would crash it" \
  "$work/go.verify" || fail "the trace does not say why: $(cat "$work/go.verify")"
grep -q "uprobe_return=" "$work/go.verify" && fail "a return probe fired in a Go program"
[ "$(count uprobe_entry "$work/go.verify")" = 4000 ] \
  || fail "4000 calls of main.work, not: $(cat "$work/go.verify")"
"$tracectl" export --format json "$work/go" -o "$work/go.jsonl" > /dev/null
python3 - "$work/go.jsonl" << 'EOF'
import json, sys
args = sorted(e["args"][0] for e in map(json.loads, open(sys.argv[1])) if e["kind"] == "uprobe_entry")
if args != list(range(4000)):
    sys.exit(f"FAIL: main.work's arguments are not 0..3999: {args[:5]} ... {args[-5:]}")
EOF
echo PASS
