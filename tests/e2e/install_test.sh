#!/usr/bin/env bash
# `cmake --install` as users and packagers run it.
# The shim (component "shim"): only its files, found by find_package(loupe)
# and by pkg-config, compiling warning-free as C11 and C++17 with gcc and
# clang; its probes are listed by bpftrace.
# Everything: the three binaries, which run from the prefix; louped's
# default config, sysusers entry and unit, and the collector's unit, naming
# the installed binaries and config (systemd-analyze verify accepts them).
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$build" --component shim --prefix "$work/prefix" > /dev/null
test -f "$work/prefix/include/loupe/loupe.h" || fail "header not installed"
[ ! -e "$work/prefix/bin" ] || fail "component shim installed programs: $(ls "$work/prefix/bin")"

cmake -S "$source/tests/e2e/shim_consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  > "$work/configure.log" 2>&1 || fail "find_package(loupe): $(cat "$work/configure.log")"
cmake --build "$work/consumer" > "$work/build.log" 2>&1 || fail "consumer: $(cat "$work/build.log")"
"$work/consumer/consumer" || fail "untraced, loupe_tracing() must be 0"

flags=$(PKG_CONFIG_PATH="$work/prefix/share/pkgconfig" pkg-config --cflags loupe | xargs) \
  || fail "pkg-config loupe"
[ -f "${flags#-I}/loupe/loupe.h" ] || fail "pkg-config cflags name no directory with loupe/loupe.h: $flags"

strict="-Wall -Wextra -pedantic -Werror"
for cc in gcc clang; do
  $cc -std=c11 $strict $flags -x c -c -o "$work/c.o" - <<'C' || fail "$cc C11"
#include <loupe/loupe.h>
void work(int n) {
  loupe_span_t span = loupe_span_begin("work");
  LOUPE_EVENT("item", loupe_int("n", n), loupe_string("tag", "x"), loupe_double("ratio", 0.5));
  LOUPE_MARK("mark");
  LOUPE_THREAD_NAME("worker");
  LOUPE_TRIGGER("dump");
  loupe_operation_end(loupe_operation_begin(7, "request"));
  loupe_span_end(span);
}
C
done
for cxx in g++ clang++; do
  $cxx -std=c++17 $strict $flags -x c++ -o "$work/cxx" - <<'CXX' || fail "$cxx C++17"
#include <loupe/loupe.h>
int main() {
  loupe::Operation operation(1, "request");
  LOUPE_SCOPE("main");
  LOUPE_EVENT("item", loupe_uint("n", 1), loupe_bool("ok", 1), loupe_bytes("size", 10));
  loupe_counter_double("load", 0.25);
  return loupe_tracing();
}
CXX
done

# Compatible notes: bpftrace lists every shim probe of the C++ program.
listed=$(bpftrace -l "usdt:$work/cxx:*" 2> /dev/null | sort | tr '\n' ' ')
for probe in counter instant operation_begin operation_end span_begin span_end; do
  [[ "$listed" == *"loupe:$probe "* ]] || fail "bpftrace does not list loupe:$probe: $listed"
done

# The whole install, into a prefix of its own.
full="$work/full"
cmake --install "$build" --prefix "$full" > "$work/install.log" 2>&1 \
  || fail "cmake --install: $(cat "$work/install.log")"
for file in bin/louped bin/tracectl bin/loupe-collector include/loupe/loupe.h \
            share/cmake/loupe/loupeConfig.cmake share/pkgconfig/loupe.pc etc/loupe/louped.toml \
            lib/sysusers.d/loupe.conf lib/systemd/system/louped.service \
            lib/systemd/system/loupe-collector.service share/doc/loupe/operations.md; do
  [ -f "$full/$file" ] || fail "cmake --install did not install $file"
done
for program in tracectl louped loupe-collector; do
  "$full/bin/$program" --help > "$work/help.out" 2>&1 \
    || fail "installed $program --help: $(cat "$work/help.out")"
done
"$full/bin/tracectl" --help | grep -q '^ *attach' || fail "installed tracectl --help lists no attach"
cmp -s "$source/deploy/louped.toml" "$full/etc/loupe/louped.toml" || fail "installed louped.toml differs"
grep -qx "ExecStart=$full/bin/louped --config $full/etc/loupe/louped.toml" \
  "$full/lib/systemd/system/louped.service" \
  || fail "louped.service does not start the installed louped with the installed config:
$(grep ExecStart "$full/lib/systemd/system/louped.service")"
grep -q "^ExecStart=$full/bin/loupe-collector " "$full/lib/systemd/system/loupe-collector.service" \
  || fail "loupe-collector.service does not start the installed loupe-collector"
for unit in louped.service loupe-collector.service; do
  systemd-analyze verify "$full/lib/systemd/system/$unit" > "$work/verify.out" 2>&1 \
    && [ ! -s "$work/verify.out" ] || fail "installed $unit: $(cat "$work/verify.out")"
done

# The installed shim header, as a C program in the full prefix sees it.
gcc -std=c11 $strict -I"$full/include" -x c -o "$work/c" - <<'C' || fail "C11 with the installed header"
#include <loupe/loupe.h>
int main(void) {
  LOUPE_MARK("installed");
  return loupe_tracing();
}
C
"$work/c" || fail "untraced, loupe_tracing() must be 0"
echo "PASS"
