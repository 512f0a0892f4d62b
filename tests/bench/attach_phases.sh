#!/usr/bin/env bash
# Where an attach spends its time before the first event (root):
#   tests/bench/attach_phases.sh [build-dir]   # REPEATS (3), TRACECTL=path
# A quiet demo app is traced for 1 s by an embedded tracectl while bpftrace
# stamps, from tracectl's execve: main(), Sources::Start, the unwind tables'
# preparation, the kallsyms scan, every parse of the kernel's BTF by libbpf,
# every BPF object's load and the sched programs' attach (from then on
# events are recorded). Uprobes on the binary's own symbols, so the
# phases are timed without changing the program. Prints figures only.
set -euo pipefail
build=${1:-build}
tracectl=$(realpath "${TRACECTL:-$build/tools/tracectl/tracectl}")
app=$build/tests/testprogs/loupe-demo-app
repeats=${REPEATS:-3}
libbpf=$(ldd "$tracectl" | awk '/libbpf\.so/ {print $3}')
[ -n "$libbpf" ] || { echo "$tracectl is not linked with a shared libbpf to probe" >&2; exit 1; }
tmp=$(mktemp -d)
export LOUPE_SOCKET=$tmp/no-louped.sock  # embedded: the tracer is tracectl itself
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$tmp"' EXIT
command -v bpftrace > /dev/null || { echo "bpftrace is needed"; exit 1; }

symbol() {  # the one mangled name matching a pattern, or fail naming it
  local found; found=$(nm "$tracectl" | awk -v p="$1" '$2 == "T" && $3 ~ p {print $3}')
  [ "$(wc -l <<< "$found")" = 1 ] && [ -n "$found" ] || { echo "no single symbol for $1" >&2; exit 1; }
  echo "$found"
}
start=$(symbol '^_ZN5loupe3bpf7Sources5Start')
prepare=$(symbol '^_ZN5loupe3bpf10UnwindMaps7Prepare')
kallsyms=$(symbol '^_ZN5loupe7symbols(12ScanKallsyms|21KallsymsFunctionRange)ESt17')

cat > "$tmp/phases.bt" << EOF
tracepoint:syscalls:sys_enter_execve /str(args->filename) == "$tracectl"/ { @t0 = nsecs; }
uprobe:$tracectl:main /@t0/ { printf("main %d\n", (nsecs - @t0) / 1000); }
uprobe:$tracectl:$start /@t0/ { printf("sources_start %d\n", (nsecs - @t0) / 1000); }
uretprobe:$tracectl:$prepare /@t0/ { printf("unwind_prepared %d\n", (nsecs - @t0) / 1000); }
uretprobe:$tracectl:$kallsyms /@t0/ { printf("kallsyms_scanned %d\n", (nsecs - @t0) / 1000); }
uprobe:$libbpf:btf__load_vmlinux_btf /@t0/ { @btf[tid] = nsecs; }
uretprobe:$libbpf:btf__load_vmlinux_btf /@btf[tid]/ {
  printf("kernel_btf_parsed_ms %d\n", (nsecs - @btf[tid]) / 1000); delete(@btf[tid]); }
uprobe:$libbpf:bpf_object__load_skeleton /@t0/ { @load[tid] = nsecs; }
uretprobe:$libbpf:bpf_object__load_skeleton /@load[tid]/ {
  printf("object_loaded %d in_ms %d\n", (nsecs - @t0) / 1000, (nsecs - @load[tid]) / 1000); }
uretprobe:$libbpf:bpf_object__attach_skeleton /@t0/ { printf("sched_attached %d\n", (nsecs - @t0) / 1000); }
tracepoint:sched:sched_process_exit /@t0 && pid == tid && comm == "tracectl"/ { exit(); }
END { clear(@t0); clear(@btf); clear(@load); }
EOF

"$app" 600 > "$tmp/app.out" 2>&1 &
waited=0
until grep -q ready "$tmp/app.out"; do
  sleep 0.05; waited=$((waited + 1))
  [ "$waited" -lt 200 ] || { echo "the demo app never became ready" >&2; exit 1; }
done
pid=$(awk '/ready/ {print $2}' "$tmp/app.out")
for run in $(seq 1 "$repeats"); do
  bpftrace "$tmp/phases.bt" > "$tmp/phases.$run" 2>&1 &
  watcher=$!
  until grep -q Attaching "$tmp/phases.$run" 2> /dev/null; do
    kill -0 "$watcher" 2> /dev/null || { echo "bpftrace failed: $(cat "$tmp/phases.$run")" >&2; exit 1; }
    sleep 0.1
  done
  sleep 1
  "$tracectl" attach -d 1s -o "$tmp/trace.$run" "$pid" > /dev/null 2>&1 || true
  wait "$watcher" || true
  # Microseconds from execve to each step; "in" is the step's own length.
  echo "run $run (ms from execve):"
  awk '$1 == "kernel_btf_parsed_ms" {printf "  kernel BTF parsed by libbpf in %.1f ms\n", $2 / 1000; next}
       $1 == "object_loaded" {printf "  %7.1f  BPF object loaded (%.1f ms)\n", $2 / 1000, $4 / 1000; next}
       NF == 2 && $2 ~ /^[0-9]+$/ {printf "  %7.1f  %s\n", $2 / 1000, $1}' "$tmp/phases.$run"
done
