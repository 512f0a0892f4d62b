#!/usr/bin/env bash
# The deployment files, checked without a cluster or a container engine:
# the Kubernetes manifests lint clean and hold together (check_manifests.py);
# the default config and the collector's unit are valid; the Dockerfile
# builds with tools/install-deps.sh and its runtime stage installs a package
# for every shared library the three binaries load.
set -euo pipefail
source_dir=$1 louped=$2 tracectl=$3 collector=$4
deploy="$source_dir/deploy"
fail() { echo "FAIL: $*"; exit 1; }

yamllint -s -d "{extends: default, rules: {line-length: {max: 110}, document-start: disable,
                 braces: {max-spaces-inside: 1}}}" "$deploy/k8s" || fail "yamllint"
python3 "$(dirname "$0")/check_manifests.py" "$deploy/k8s" "$deploy/systemd/louped.service" "$louped"

# --check-config also checks the host (the socket group exists): the group
# "loupe" is the target machine's, so a group every machine has stands in.
"$louped" --config "$deploy/louped.toml" --check-config --socket-group root > /dev/null \
  || fail "deploy/louped.toml is refused"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#/usr/bin/loupe-collector#$collector#" "$deploy/systemd/loupe-collector.service" \
  > "$work/loupe-collector.service"
systemd-analyze verify "$work/loupe-collector.service" > "$work/verify.out" 2>&1 \
  && [ ! -s "$work/verify.out" ] || fail "loupe-collector.service: $(cat "$work/verify.out")"

dockerfile="$deploy/docker/Dockerfile"
[ "$(grep -c '^FROM ' "$dockerfile")" = 2 ] || fail "the Dockerfile should have a build and a runtime stage"
grep -q '^FROM debian:12 AS build$' "$dockerfile" || fail "the build stage is not debian:12"
grep -q '^FROM debian:12-slim$' "$dockerfile" || fail "the runtime stage is not debian:12-slim"
grep -q 'RUN /src/tools/install-deps.sh' "$dockerfile" || fail "the build stage does not use tools/install-deps.sh"
for binary in louped tracectl loupe-collector; do
  grep -q "/$binary\b" "$dockerfile" || fail "the image lacks $binary"
done
# The runtime stage's package list (the apt-get install lines after the second FROM).
runtime=$(awk '/^FROM debian:12-slim/ {on=1} on' "$dockerfile" \
  | sed -n '/apt-get install/,/rm -rf/p' | tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' \
  | grep -vxE 'apt-get|install|rm|rf|&&')
# One query for all (apt-cache exits 0 even when some are unknown).
# shellcheck disable=SC2086
known=$(apt-cache show $runtime 2> /dev/null | sed -n 's/^Package: //p' | sort -u)
# A package installed here is one Debian 12 has; apt's answer alone once
# missed libdw1 in CI (installed, and found by the same query on every rerun),
# so an unknown name is asked again on its own and apt's words are shown.
installed=$(dpkg-query -W -f '${Package}\n' 2> /dev/null | sed 's/:.*//')
for package in $runtime; do
  grep -qx "$package" <<< "$known" && continue
  grep -qx "$package" <<< "$installed" && continue
  answer=$(apt-cache show "$package" 2>&1) && grep -qx "Package: $package" <<< "$answer" && continue
  fail "the runtime stage installs '$package', which Debian 12 lacks (apt-cache: $(echo "$answer" | head -3))"
done
# Membership is tested with here-strings, not `echo | grep -q`: under
# pipefail, grep quitting at its match while echo still writes a long list
# fails the pipeline (SIGPIPE), which reads as "missing".
# Every library the binaries load comes from a package the stage installs.
for binary in "$louped" "$tracectl" "$collector"; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u > "$work/libs"
# One dpkg query for all of them (each is a scan of dpkg's database).
# shellcheck disable=SC2046
dpkg -S $(sed 's#.*/#*/#' "$work/libs") 2>/dev/null | grep -v i386 > "$work/owners" || true
while read -r lib; do
  package=$(grep -m1 "/$(basename "$lib")\$" "$work/owners" | cut -d: -f1)
  [ -n "$package" ] || fail "no Debian package holds $lib"
  grep -qx "$package" <<< "$runtime" || fail "$(basename "$lib") comes from $package, missing in the runtime stage"
done < "$work/libs"
echo "deploy files: all checks passed"
