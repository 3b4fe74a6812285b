#!/usr/bin/env bash
# A throwaway single-node Ceph cluster for tests and benchmarks, from Debian's packages:
#
#   scripts/ceph-test-cluster.sh start DIR   start it; prints the path of its ceph.conf
#   scripts/ceph-test-cluster.sh stop DIR    stop what `start DIR` started, by PID
#   scripts/ceph-test-cluster.sh stop-osd DIR | start-osd DIR   the OSD alone (fault tests)
#
# One monitor and one OSD on 127.0.0.1 (ports picked free at start), auth none, pools of
# size 1, a pool named `rbd` initialised for RBD. Everything (config, data, logs, sockets,
# pidfiles) lives under DIR; nothing in /etc or /var is touched, so several clusters can run
# at once. The OSD stores its data in a BlueStore file DIR/osd.0/block (CEPH_TEST_STORE=
# memstore keeps it in memory instead: faster to start, but lost when the OSD stops).
#
# Start exits non-zero (after stopping what it started) when a step fails or does not finish
# within its `timeout`; every wait is bounded. Stop ends only the processes named in DIR's
# pidfiles and only if they are still the ceph daemons this script started.
#
# Footprint and start time are documented in docs/rbd.md.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || {
  echo "usage: $0 start|stop|stop-osd|start-osd DIR" >&2
  exit 2
}

# Sends SIGTERM, then SIGKILL after 10 s, to the daemon in pidfile $1 if it is still one of
# ours (its exe is a ceph binary and its command line names our config).
stop_pidfile() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  rm -f "$pidfile"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in */ceph-mon | */ceph-osd) ;; *) return 0 ;; esac
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$dir/ceph.conf" || return 0
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
}

stop_all() {
  stop_pidfile "$dir/run/osd.0.pid"
  stop_pidfile "$dir/run/mon.a.pid"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

case "$cmd" in
  stop)
    dir=$(cd "$dir" 2>/dev/null && pwd) || exit 0
    stop_all
    exit 0
    ;;
  stop-osd)
    dir=$(cd "$dir" && pwd)
    stop_pidfile "$dir/run/osd.0.pid"
    exit 0
    ;;
  start-osd)
    dir=$(cd "$dir" && pwd)
    timeout -k 5 60 ceph-osd -c "$dir/ceph.conf" -i 0 2>>"$dir/log/osd.0.stderr" || exit 1
    for _ in $(seq 100); do [ -s "$dir/run/osd.0.pid" ] && exit 0; sleep 0.1; done
    exit 1
    ;;
  start) ;;
  *)
    echo "usage: $0 start|stop|stop-osd|start-osd DIR" >&2
    exit 2
    ;;
esac

for c in ceph-mon ceph-osd ceph monmaptool ceph-authtool rbd python3 uuidgen; do
  command -v "$c" >/dev/null || {
    echo "ceph-test-cluster: $c is not installed (packages ceph-mon ceph-osd ceph-common)" >&2
    exit 3
  }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ -f "$dir/run/mon.a.pid" ] && kill -0 "$(cat "$dir/run/mon.a.pid")" 2>/dev/null; then
  echo "ceph-test-cluster: a cluster is already running in $dir" >&2
  exit 1
fi
rm -rf "$dir/mon.a" "$dir/osd.0" "$dir/run" "$dir/log" "$dir/keyring" "$dir/monmap"
mkdir -p "$dir/mon.a" "$dir/osd.0" "$dir/run" "$dir/log"
conf=$dir/ceph.conf
store=${CEPH_TEST_STORE:-bluestore}
fsid=$(uuidgen)
port=$(free_port)

# Small caches and no background work: the cluster serves one test at a time on a shared
# machine. Settings under [global] reach the clients (rbd, librbd in volstack) too.
cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$port
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
keyring = $dir/keyring
run dir = $dir/run
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
crash dir = $dir/crash
ms bind ipv6 = false
ms bind msgr2 = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
osd crush chooseleaf type = 0
mon warn on pool no redundancy = false
client mount timeout = 30
[mon]
admin socket = $dir/run/\$name.asok
mon data = $dir/\$name
mon cluster log file = $dir/log/cluster.log
[osd]
admin socket = $dir/run/\$name.asok
osd data = $dir/\$name
osd objectstore = $store
osd memory target = 939524096
osd memory cache min = 67108864
bluestore block create = true
bluestore block size = 2147483648
bluestore cache autotune = false
bluestore cache size = 67108864
bluestore fsck on mkfs = false
memstore device bytes = 1073741824
osd op num shards = 1
# The OSD's own crush updates at start are refused by this monitor ("wrong fsid" with auth
# none), so the script places it in the crush map itself.
osd crush update on start = false
osd class update on start = false
osd op num threads per shard = 2
osd scrub during recovery = false
# A client killed with -9 leaves a watch on its images; librbd's exclusive lock passes to the
# next client only when that watch has timed out (30 s by default).
osd client watch timeout = 5
osd scrub begin hour = 0
osd scrub end hour = 0
EOF

fail() {
  echo "ceph-test-cluster: $*" >&2
  local log
  for log in "$dir"/log/mon.a.log "$dir"/log/osd.0.log; do
    [ -f "$log" ] && tail -n 15 "$log" >&2
  done
  stop_all
  exit 1
}

ceph_() { timeout -k 5 30 ceph -c "$conf" "$@"; }
# A monitor just started may answer a first command with "wrong fsid" (the client had no
# monmap yet); the commands used here are idempotent, so they are retried, 10 times at most.
ceph_retry() {
  local i
  for i in $(seq 10); do
    ceph_ "$@" 2>>"$dir/log/ceph-cli.log" && return 0
    sleep 0.5
  done
  return 1
}

ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
monmaptool --create --clobber --fsid "$fsid" --addv a "v1:127.0.0.1:$port" "$dir/monmap" >/dev/null
timeout -k 5 60 ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" \
  2>"$dir/log/mon-mkfs.log" || fail "ceph-mon --mkfs failed"
# Daemons fork into the background after writing their pidfile.
timeout -k 5 60 ceph-mon -c "$conf" -i a 2>>"$dir/log/mon.a.stderr" || fail "ceph-mon did not start"
for _ in $(seq 100); do [ -s "$dir/run/mon.a.pid" ] && break; sleep 0.1; done
[ -s "$dir/run/mon.a.pid" ] || fail "ceph-mon wrote no pidfile"

uuid=$(uuidgen)
id=$(ceph_retry osd new "$uuid") || fail "ceph osd new failed"
[ "$id" = 0 ] || fail "unexpected OSD id '$id'"
timeout -k 5 120 ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$uuid" 2>"$dir/log/osd-mkfs.log" ||
  fail "ceph-osd --mkfs failed"
ceph_retry osd crush add osd.0 1.0 root=default host=localhost >/dev/null 2>&1 ||
  fail "crush add osd.0 failed"
timeout -k 5 60 ceph-osd -c "$conf" -i 0 2>>"$dir/log/osd.0.stderr" || fail "ceph-osd did not start"
for _ in $(seq 100); do [ -s "$dir/run/osd.0.pid" ] && break; sleep 0.1; done
[ -s "$dir/run/osd.0.pid" ] || fail "ceph-osd wrote no pidfile"

ceph_retry osd pool create rbd 8 8 >/dev/null 2>&1 || fail "pool create failed"
ceph_retry osd pool set rbd size 1 --yes-i-really-mean-it >/dev/null 2>&1 || fail "pool size 1 failed"
# `rbd pool init` writes to the pool, so it returns once its PGs are active (there is no
# manager daemon to ask `pg stat`).
timeout -k 5 60 rbd -c "$conf" pool init rbd || fail "rbd pool init failed (PGs not active?)"
echo "$conf"
