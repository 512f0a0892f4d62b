#!/usr/bin/env bash
# A Go program's stacks end where its runtime starts or switches them
# (mstart, goexit, mcall, morestack, systemstack...), as Go's own
# traceback does. A walk above those read an earlier use of the stack:
# `sysmon ← mstart ← runtime/cgo ← sysmon ← …`, `morestack ← newproc`,
# frames that never called each other, and most stacks counted as cut.
# Both ways Go starts its threads: clone (pure Go) and pthread_create (cgo).
set -euo pipefail
tracectl=$1 source=$2
source "$(dirname "$0")/privileged.sh"
command -v go > /dev/null || fail "go is not installed (golang-go)"
app=
trap '[ -z "$app" ] || kill "$app" 2> /dev/null; rm -rf "$work"' EXIT
export LOUPE_SOCKET=$work/no-louped.sock  # embedded

for variant in clone cgo_threads; do
  (cd "$source/tests/testprogs/go_stacks" &&
    GOCACHE=$work/gocache GOPATH=$work/gopath GOFLAGS=-mod=mod go build -tags "$variant" \
      -o "$work/go_stacks" .) || fail "go build of tests/testprogs/go_stacks ($variant)"
  mkfifo "$work/in"
  "$work/go_stacks" 100000000 < "$work/in" > "$work/out" 2>&1 &
  app=$!
  exec {app_in}> "$work/in"
  until grep -q ready "$work/out"; do sleep 0.05; done
  echo go >&"$app_in"
  "$tracectl" attach -q -d 2s -o "$work/trace" "$app" > "$work/attach.out" 2>&1 \
    || fail "attach ($variant): $(cat "$work/attach.out")"
  kill "$app"; wait "$app" 2> /dev/null || true; app=
  exec {app_in}>&-
  "$tracectl" verify "$work/trace" > "$work/verify" 2>&1 || fail "verify ($variant): $(cat "$work/verify")"
  "$tracectl" export --format folded -o "$work/folded" "$work/trace" > /dev/null
  python3 - "$variant" "$work/verify" "$work/folded" << 'PY'
import re, sys
variant, verify, folded = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read().splitlines()
counts = {k: int(v) for k, v in re.findall(r"\b(cpu_sample|off_cpu)=(\d+)", verify)}
stacks = counts.get("cpu_sample", 0) + counts.get("off_cpu", 0)
cut = sum(int(n) for n in re.findall(r"cut (\d+) \((?:cpu_sample|sched)/unwind_stopped\)", verify))
if stacks < 200:
    sys.exit(f"FAIL ({variant}): only {stacks} stacks traced:\n{verify}")
# Before: 44 % of the samples and a third of the switch-outs were cut.
if cut * 50 > stacks:
    sys.exit(f"FAIL ({variant}): {cut} of {stacks} stacks cut short (over 2 %):\n{verify}")
ends = {"runtime.goexit", "runtime.mstart", "runtime.rt0_go", "runtime.mcall", "runtime.morestack",
        "runtime.systemstack", "runtime.asmcgocall", "runtime.cgocallback", "runtime.nanotime1",
        "runtime.walltime", "runtime.walltime1"}
samples = ended = 0
for line in folded:
    stack, n = line.rsplit(" ", 1)
    user = [f for f in stack.split(";")[1:] if not f.endswith("_[k]")]  # outermost first
    if not user:
        continue
    samples += int(n)
    # Where a stack begins nothing called it: never a frame in the middle.
    for frame in user[1:]:
        if frame in ("runtime.goexit", "runtime.mstart", "runtime.rt0_go"):
            sys.exit(f"FAIL ({variant}): {frame} called by another frame: {stack}")
    ended += int(n) if user[0] in ends else 0
# Else only a stack deeper than a walk goes (main.deep's recursion), or
# a rare other end.
truncated = sum(int(n) for n in re.findall(r"cut (\d+) \(cpu_sample/stack_truncated\)", verify))
if samples - ended - truncated > max(2, samples // 50):
    sys.exit(f"FAIL ({variant}): {ended} of {samples} sampled stacks end where Go's stacks do "
             f"({truncated} cut at the depth limit)")
print(f"{variant}: {stacks} stacks, {cut} cut; {ended} of {samples} samples end at a Go stack's end, "
      f"{truncated} cut at the depth limit")
PY
  rm -rf "$work/trace" "$work/in"
done
echo PASS
