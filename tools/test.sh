#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds, runs every ctest test
# (privileged ones too, so run it as root), then the sanitizer build of the
# readers with a bounded fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/install-deps.sh
./tools/build.sh
(cd build && ctest -j2 --output-on-failure --timeout 600)

# Readers of untrusted input (segments, USDT notes, symbol text, control
# requests) under AddressSanitizer + UBSan, and libFuzzer.
# Configured on every run: a kept build-asan/ takes a changed fuzzing time.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DLOUPE_SANITIZE=address,undefined -DLOUPE_FUZZ=ON -DLOUPE_BUILD_BENCH=OFF \
  -DLOUPE_FUZZ_SECONDS="${LOUPE_FUZZ_SECONDS:-30}" > /dev/null
cmake --build build-asan -j2 --target format_tests probes_unit_tests segment_reader_fuzz \
  block_decoder_fuzz usdt_notes_fuzz symbols_text_fuzz control_request_fuzz symbols_unit_tests \
  fuzz_make_seeds usdt_note_seeds symbols_text_seeds ship_unit_tests
(cd build-asan && ctest -j2 --output-on-failure --timeout 600 -L 'unit|fuzz' -E '_replay$')
