#!/usr/bin/env bash
# Starts OpenStack Swift with its S3 API (s3api + tempauth) on 127.0.0.1, one
# replica of everything in <dir>/srv, and waits until it answers. Writes
# <dir>/swift.env (S3_ENDPOINT, S3_REGION, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY) and <dir>/swift.pids (the four servers, to kill by
# id), and creates <bucket>. Exit 77 when Debian's swift packages are missing, 1 on failure.
# usage: start_swift.sh <dir> <bucket>
set -euo pipefail
mkdir -p "$1"
dir=$(realpath "$1") bucket=$2
for server in proxy account container object; do
  command -v "swift-$server-server" > /dev/null || {
    echo "swift-$server-server not installed (Debian package swift-$server)"; exit 77; }
done
mkdir -p "$dir/srv/d1"
ports=($(/usr/bin/python3 -c '
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))'))
proxy_port=${ports[0]}

# swift.conf is read from swift_dir, so nothing in /etc/swift is used.
cat > "$dir/swift.conf" <<CONF
[swift-hash]
swift_hash_path_suffix = loupe-test
[storage-policy:0]
name = Policy-0
default = yes
CONF
common="swift_dir = $dir
devices = $dir/srv
mount_check = false
bind_ip = 127.0.0.1
workers = 0
log_name = swift
log_facility = LOG_LOCAL0
log_level = WARNING"
i=1
for ring in account container object; do
  cat > "$dir/$ring-server.conf" <<CONF
[DEFAULT]
$common
bind_port = ${ports[$i]}
[pipeline:main]
pipeline = $ring-server
[app:$ring-server]
use = egg:swift#$ring
CONF
  (cd "$dir" && swift-ring-builder "$ring.builder" create 0 1 0 > /dev/null &&
   swift-ring-builder "$ring.builder" add "r1z1-127.0.0.1:${ports[$i]}/d1" 1 > /dev/null &&
   swift-ring-builder "$ring.builder" rebalance > /dev/null) || { echo "ring $ring failed"; exit 1; }
  i=$((i + 1))
done
# s3api needs slo for multipart uploads; tempauth's user test:tester is the
# S3 access key, its password the secret.
cat > "$dir/proxy-server.conf" <<CONF
[DEFAULT]
$common
bind_port = $proxy_port
[pipeline:main]
pipeline = catch_errors gatekeeper proxy-logging cache s3api tempauth slo dlo proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true
[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = egg:swift#memcache
[filter:s3api]
use = egg:swift#s3api
location = us-east-1
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
CONF

: > "$dir/swift.pids"
for server in account container object proxy; do
  "swift-$server-server" "$dir/$server-server.conf" > "$dir/$server.log" 2>&1 &
  echo $! >> "$dir/swift.pids"
done
cat > "$dir/swift.env" <<ENV
S3_ENDPOINT=http://127.0.0.1:$proxy_port
S3_REGION=us-east-1
AWS_ACCESS_KEY_ID=test:tester
AWS_SECRET_ACCESS_KEY=testing
ENV
# Up when the proxy answers and the account server behind it is listening.
for _ in $(seq 300); do
  if curl -s -o /dev/null "http://127.0.0.1:$proxy_port/healthcheck" 2>/dev/null &&
     /usr/bin/python3 -c "import socket,sys; [socket.create_connection(('127.0.0.1', p), 1) for p in sys.argv[1:]]" \
       "${ports[@]}" 2>/dev/null; then
    (set -a; . "$dir/swift.env"; "$(dirname "$0")/s3_create_bucket.py" "$S3_ENDPOINT" "$S3_REGION" \
      "$bucket") || exit 1
    exit 0
  fi
  while read -r pid; do
    kill -0 "$pid" 2>/dev/null || { echo "a swift server exited:"; tail -n 5 "$dir"/*.log; exit 1; }
  done < "$dir/swift.pids"
  sleep 0.1
done
echo "swift did not come up in 30 s:"; tail -n 5 "$dir"/*.log
exit 1
