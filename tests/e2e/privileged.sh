# Sourced by the e2e tests that load BPF: fail(), the root check (a skip,
# exit 77, unless LOUPE_REQUIRE_PRIVILEGED=1 makes it a failure) and a
# work directory others may enter.
fail() { echo "FAIL: $*"; exit 1; }
if [ "$(id -u)" != 0 ]; then
  [ "${LOUPE_REQUIRE_PRIVILEGED:-}" = 1 ] && fail "needs root (LOUPE_REQUIRE_PRIVILEGED=1)"
  echo "SKIP: needs root to load BPF"; exit 77
fi
work=$(mktemp -d)
chmod 755 "$work"
