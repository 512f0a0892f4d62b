#!/usr/bin/env bash
# A return probe on a Go function is refused, not placed: the kernel swaps
# the return address on the goroutine's stack for its trampoline, and Go's
# runtime, which reads return addresses when it grows a stack or scans it,
# dies on it ("fatal error: unknown caller pc"). The program (stacks that
# grow, a GC every few calls) must live through a session that asks for
# one, the trace must say why it has none, and an entry probe still works.
set -euo pipefail
tracectl=$1 source=$2
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi
command -v go > /dev/null || fail "go is not installed (golang-go)"
work=$(mktemp -d)
app=
trap '[ -n "$app" ] && kill "$app" 2> /dev/null; rm -rf "$work"' EXIT
export LOUPE_SOCKET=$work/no-louped.sock  # embedded

(cd "$source/tests/testprogs/go_stacks" &&
  GOCACHE=$work/gocache GOPATH=$work/gopath GOFLAGS=-mod=mod go build -o "$work/go_stacks" .) \
  || fail "go build of tests/testprogs/go_stacks"

# run SECONDS NAME PROBE: traces the program for 2 s asking for PROBE; the
# program must then finish on its own ("done", exit 0).
run() {
  "$work/go_stacks" "$1" > "$work/$2.out" 2>&1 &
  app=$!
  until grep -q ready "$work/$2.out"; do sleep 0.05; done
  "$tracectl" attach "$app" --duration 2s --output "$work/$2" -q --uprobe "$3" \
    > "$work/$2.attach" 2>&1 || fail "attach with $3: $(cat "$work/$2.attach")"
  wait "$app" || fail "the Go program died under $3: $(grep -m3 -E 'fatal|unexpected' "$work/$2.out")"
  app=
  grep -q done "$work/$2.out" || fail "the Go program did not finish under $3"
  "$tracectl" verify "$work/$2" > "$work/$2.verify" || fail "verify: $(cat "$work/$2.verify")"
}

run 4 return "$work/go_stacks:main.work%return"
grep -q "note: --uprobe '$work/go_stacks:main.work%return' .*is a Go program: a return probe would crash it" \
  "$work/return.verify" || fail "the trace does not say why: $(cat "$work/return.verify")"
grep -q "uprobe_return=" "$work/return.verify" && fail "a return probe fired in a Go program"

run 4 entry "$work/go_stacks:main.work"
grep -Eq "uprobe_entry=[1-9]" "$work/entry.verify" \
  || fail "the entry probe did not fire: $(cat "$work/entry.verify")"
echo PASS
