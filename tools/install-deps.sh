#!/usr/bin/env bash
# Installs every build and test dependency of Loupe from Debian 12 packages.
# Idempotent and non-interactive: safe to run on every CI start.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config ccache clang llvm lld
  libclang-rt-14-dev
  # BPF
  libbpf-dev bpftool linux-libc-dev
  # libraries
  libelf-dev libdw-dev zlib1g-dev libzstd-dev zstd libisal-dev
  # x86-64 decoding: the return instructions of functions probed at their returns
  libcapstone-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev libsystemd-dev libssl-dev
  nlohmann-json3-dev
  # Rust's v0 symbol names: libiberty's demangler
  libiberty-dev
  # the collector's S3 client
  libcurl4-openssl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev systemtap-sdt-dev
  bpftrace linux-perf golang-go openssl procps util-linux time bc systemd yamllint python3-yaml
  # libc's local symbols (memcpy variants, lock internals) that stack tests name
  libc6-dbg
  # the object-store test: OpenStack Swift with s3api, started on loopback
  swift-proxy swift-account swift-container swift-object curl
  # a Rust program whose panics unwind probed calls (the return probe test)
  rustc
  # a sending host whose clock runs behind, for the collector's retention test
  faketime
  # protobuf's .proto parser (compiler::Importer): the Perfetto export test
  # decodes against Perfetto's own schema at run time
  libprotoc-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # No fsync per unpacked file (a fresh machine has nothing to lose if the
  # install is cut), and no manual-page index rebuilt for packages nobody
  # reads the pages of: both a large part of installing ~60 packages.
  echo "man-db man-db/auto-update boolean false" | debconf-set-selections 2> /dev/null || true
  apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-unsafe-io \
    "${missing[@]}"
fi

# The tracepoint and uprobe interfaces live in tracefs; some machines boot without it mounted.
if [ "$(id -u)" = 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
echo "install-deps: all ${#packages[@]} packages present"
