#!/usr/bin/env bash
# Return probes never kill their target. The kernel's return probe swaps
# the return address on the stack for its trampoline: a C++ exception
# unwinding through the call finds no frame info there (std::terminate),
# and Go's runtime, which reads return addresses when it grows or scans a
# goroutine's stack, dies on it ("fatal error: unknown caller pc").
# - C++ (a file with exception tables): the returns are probed at the
#   function's own return instructions; every call that returned is seen
#   to, exactly, and the calls an exception left are not.
# - Go: refused, with a note in the trace; an entry probe still works.
set -euo pipefail
tracectl=$1 throw_through=$2 source=$3
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

# C++: 3000 calls of handle_request, every third left by an exception.
mkfifo "$work/cpp.in"
"$throw_through" 3000 < "$work/cpp.in" > "$work/cpp.out" 2>&1 &
pids+=($!)
cpp=$!
exec {cpp_in}> "$work/cpp.in"
until grep -q ready "$work/cpp.out"; do sleep 0.05; done
"$tracectl" attach "$cpp" --duration 2s --output "$work/cpp" -q \
  --uprobe "$throw_through:_Z14handle_requestl%return" > "$work/cpp.attach" 2>&1 &
tracer=$!
until grep -q "probe site" "$work/cpp.attach"; do sleep 0.05; done
echo go >&"$cpp_in"
wait "$tracer" || fail "attach: $(cat "$work/cpp.attach")"
kill -0 "$cpp" 2> /dev/null || fail "the C++ program died: $(tail -3 "$work/cpp.out")"
grep -q "done 2000 1000" "$work/cpp.out" || fail "the C++ program: $(cat "$work/cpp.out")"
"$tracectl" verify "$work/cpp" > "$work/cpp.verify" || fail "verify: $(cat "$work/cpp.verify")"
[ "$(count uprobe_entry "$work/cpp.verify")" = 3000 ] || fail "entries: $(cat "$work/cpp.verify")"
[ "$(count uprobe_return "$work/cpp.verify")" = 2000 ] || fail "returns: $(cat "$work/cpp.verify")"

# Go: stacks that grow and a GC every few calls.
(cd "$source/tests/testprogs/go_stacks" &&
  GOCACHE=$work/gocache GOPATH=$work/gopath GOFLAGS=-mod=mod go build -o "$work/go_stacks" .) \
  || fail "go build of tests/testprogs/go_stacks"
# go_run NAME PROBE: traces the program for 2 s asking for PROBE; the
# program must then finish on its own ("done", exit 0).
go_run() {
  "$work/go_stacks" 4 > "$work/$1.out" 2>&1 &
  local app=$!
  pids+=($app)
  until grep -q ready "$work/$1.out"; do sleep 0.05; done
  "$tracectl" attach "$app" --duration 2s --output "$work/$1" -q --uprobe "$2" \
    > "$work/$1.attach" 2>&1 || fail "attach with $2: $(cat "$work/$1.attach")"
  wait "$app" || fail "the Go program died under $2: $(grep -m3 -E 'fatal|unexpected' "$work/$1.out")"
  grep -q done "$work/$1.out" || fail "the Go program did not finish under $2"
  "$tracectl" verify "$work/$1" > "$work/$1.verify" || fail "verify: $(cat "$work/$1.verify")"
}
go_run return "$work/go_stacks:main.work%return"
grep -q "note: --uprobe '$work/go_stacks:main.work%return' .*is a Go program: a return probe would crash it" \
  "$work/return.verify" || fail "the trace does not say why: $(cat "$work/return.verify")"
grep -q "uprobe_return=" "$work/return.verify" && fail "a return probe fired in a Go program"
go_run entry "$work/go_stacks:main.work"
grep -Eq "uprobe_entry=[1-9]" "$work/entry.verify" \
  || fail "the entry probe did not fire: $(cat "$work/entry.verify")"
echo PASS
