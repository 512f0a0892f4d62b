#!/usr/bin/env bash
# Each target sees only its own headers and those of the libraries it links
# (docs/building.md, tools/cmake/IncludeRoots.cmake). With format_tests'
# include path (loupe_format, loupe_synthetic, loupe_test_support), their
# headers compile, and headers of libraries it does not link are not found.
set -euo pipefail
cxx=$1
shift
flags=()
for dir in "$@"; do flags+=("-I$dir"); done
fail() { echo "FAIL: $*"; exit 1; }
compile() { echo "#include \"$1\"" | "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" -x c++ - 2>&1; }

for header in daemon/format/record.h daemon/base/scoped_fd.h tools/synthetic/synthetic_trace.h \
              tests/support/temp_dir.h loupe/v1/trace.pb.h; do
  out=$(compile "$header") || fail "$header, of a linked library, does not compile: $out"
done
for header in daemon/probes/elf_file.h daemon/session/session.h daemon/control/session_manager.h \
              analysis/report_model.h tools/tracectl/demo.h shared/records.h \
              tests/unit/ship/collector_fixture.h pprof/profile.pb.h; do
  if out=$(compile "$header"); then
    fail "$header compiles without its library linked: the include path reaches too far"
  fi
  # GCC: "HEADER: No such file"; clang: "'HEADER' file not found".
  grep -qE "$header: No such file|'$header' file not found" <<< "$out" || fail "$header: $out"
done
echo "PASS"
