#!/bin/bash
# RbdDevice in-process against `rbd bench` (the cluster's own tool, same librbd) on the same
# image of the same cluster, in one run: 4 KiB random at queue depth 32 and 1 MiB sequential
# at queue depth 4 (rbd bench's --io-threads; volstack's caller threads, each one request in
# flight), writes then reads, interleaved for ROUNDS rounds (default 3). Prints the median
# ops/sec per case and the ratio volstack/rbd-bench (>= 1: volstack is as fast).
# Both sides run librbd with the same cache settings: the rbd tool turns
# rbd_cache_writethrough_until_flush off for itself, and so does RbdDevice (rbd_device.cc),
# so writes are acknowledged by librbd's cache on both; the rand4k-write-nocache case runs
# both with rbd_cache=false (every write one OSD round trip), the device's own overhead.
#   bench/rbd_compare.sh BUILD_DIR [CEPH_CONF] [ROUNDS]
# Without CEPH_CONF a throwaway cluster is started (scripts/ceph-test-cluster.sh) and stopped.
set -euo pipefail
B=$(realpath "${1:?usage: rbd_compare.sh BUILD_DIR [CEPH_CONF] [ROUNDS]}")
CONF=${2:-}
ROUNDS=${3:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
IO=$B/bench/rbd_device_io
[ -x "$IO" ] || { echo "no $IO (build target rbd_device_io)"; exit 1; }
W=$(mktemp -d /tmp/rbd-bench.XXXXXX)
cleanup() {
  [ -n "${img:-}" ] && timeout -k 5 60 rbd -c "$CONF" rm --no-progress "rbd/$img" >/dev/null 2>&1
  [ -n "${started:-}" ] && "$here/scripts/ceph-test-cluster.sh" stop "$W/ceph"
  rm -rf "$W"
}
trap cleanup EXIT
if [ -z "$CONF" ]; then
  started=1
  CONF=$(timeout -k 5 120 "$here/scripts/ceph-test-cluster.sh" start "$W/ceph")
fi
# The image is created before it is named for cleanup, so a name taken is never removed.
timeout -k 5 30 rbd -c "$CONF" create --size 512M "rbd/bench-$$"
img=bench-$$
# Every block written once, so reads are of allocated data on both sides.
timeout -k 5 300 rbd -c "$CONF" bench --io-type write --io-size 4M --io-threads 4 --io-total 512M \
  --io-pattern seq "rbd/$img" >/dev/null

declare -A ops
run() {  # run CASE TYPE PATTERN SIZE THREADS TOTAL [CEPH_OPTION=VALUE]
  local out opt=() name_opt=""
  if [ -n "${7:-}" ]; then
    opt=("--${7%%=*}=${7#*=}")
    name_opt=":$7"
  fi
  out=$(timeout -k 5 300 rbd -c "$CONF" "${opt[@]}" bench --io-type "$2" --io-pattern "$3" \
    --io-size "$4" --io-threads "$5" --io-total "$6" "rbd/$img" | tail -n 1)
  ops[$1.rbd]+="$(echo "$out" | sed -n 's/.*ops\/sec: *\([0-9.]*\).*/\1/p') "
  out=$(timeout -k 5 300 "$IO" "rbd:rbd/$img:conf=$CONF$name_opt" "$2" "$3" "$4" "$5" "$6")
  ops[$1.vs]+="$(echo "$out" | sed -n 's/.*ops\/sec: *\([0-9.]*\).*/\1/p') "
}
for ((r = 0; r < ROUNDS; r++)); do
  run rand4k-write write rand 4096 32 64M
  run rand4k-write-nocache write rand 4096 32 32M rbd_cache=false
  run rand4k-read read rand 4096 32 64M
  run seq1m-write write seq 1048576 4 256M
  run seq1m-read read seq 1048576 4 256M
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-22s %12s %12s %8s\n" case rbd-bench volstack ratio
for c in rand4k-write rand4k-write-nocache rand4k-read seq1m-write seq1m-read; do
  a=$(echo "${ops[$c.rbd]}" | median)
  b=$(echo "${ops[$c.vs]}" | median)
  printf "%-22s %12.1f %12.1f %8.2f\n" "$c" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN {print b / a}')"
done
echo "ops/sec, median of $ROUNDS; ratio = volstack / rbd bench; load: $(uptime | sed 's/.*load/load/')"
