#!/bin/bash
# Side-by-side export benchmark (issue 5, "Speed"), all on one backing file, interleaved:
#
#   loop stacks (dbench on XFS, then fio 4 KiB QD32 randrw on the loop device):
#     plain     losetup on the backing file
#     volstack  volstack devfs -> volstack losetup
#     nbdfuse   nbdkit file -> nbdfuse -> losetup           (if nbdkit and nbdfuse exist)
#     qsd       qemu-storage-daemon FUSE export -> losetup  (if qemu-storage-daemon exists)
#   NBD servers (fio's nbd engine, 4 KiB QD32 randrw):
#     volstack nbd serve, nbdkit file, qemu-nbd
#
# Every loop uses the same options (LOOP_OPTS, default: 4096-byte sectors, direct I/O on), so
# only the hop under the loop differs. Prints one table with ratios to the plain loop (median
# of the rounds, and the min-max spread when there are several), and the load average.
#
# Usage: bench/export_compare.sh [--quick] [--size 2G] [--clients 10] [--dbench-time 30]
#          [--fio-time 20] [--rounds 1] [--stacks plain,volstack,nbdfuse,qsd]
#          [--nbd volstack,nbdkit,qemu-nbd] [--dir DIR] [--devfs-opts "..."]
#          [--variant NAME='WORDS'] [--stats] [--nbd-opts "..."] [--sparse]
#
# The backing file is written in full first and mkfs.xfs runs with -K (no discard), so every
# stack sees the same allocated file; --sparse keeps it sparse and lets mkfs discard (slow
# where the host file system discards synchronously).
# --variant adds a loop stack NAME (use it in --stacks) that is the volstack stack with
# WORDS: "loop:ATTR=VALUE" writes the loop device's sysfs ATTR (e.g. loop:queue/nr_requests=64)
# after binding, "env:VAR=VALUE" sets an environment variable for devfs, "nice:N" runs devfs
# at that nice value (under load, its threads then wait less for a CPU), and every other word
# is a devfs option (e.g. --fuse-transport=classic); "bin:PATH" runs another volstack binary. A --variant
# named in --nbd is a volstack NBD server with WORDS as `nbd serve` options (and "bin:PATH").
# --stats prints devfs's FUSE request counters
# (VOLSTACK_DEVFS_STATS) after each volstack stack. --nbd-opts go to `volstack nbd serve`.
# Env: VOLSTACK (the binary), LOOP_OPTS. Needs root, dbench, fio, mkfs.xfs.
set -euo pipefail

SIZE=2G CLIENTS=10 DBENCH_TIME=30 FIO_TIME=20 ROUNDS=1
STACKS=plain,volstack,nbdfuse,qsd
NBDS=volstack,nbdkit,qemu-nbd
DIR=""
DEVFS_OPTS=""
NBD_OPTS=""
STATS=0
PREFILL=1
declare -A VARIANTS=()
LOOP_OPTS=${LOOP_OPTS:---sector-size 4096 --direct-io=on}
while [ $# -gt 0 ]; do
  case $1 in
    --quick) SIZE=1G DBENCH_TIME=8 FIO_TIME=5 CLIENTS=4 ;;
    --size) SIZE=$2; shift ;;
    --clients) CLIENTS=$2; shift ;;
    --dbench-time) DBENCH_TIME=$2; shift ;;
    --fio-time) FIO_TIME=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --stacks) STACKS=$2; shift ;;
    --nbd) NBDS=$2; shift ;;
    --dir) DIR=$2; shift ;;
    --devfs-opts) DEVFS_OPTS=$2; shift ;;
    --nbd-opts) NBD_OPTS=$2; shift ;;
    --variant) VARIANTS[${2%%=*}]=${2#*=}; shift ;;
    --stats) STATS=1 ;;
    --sparse) PREFILL=0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
HERE=$(cd "$(dirname "$0")/.." && pwd)
VOLSTACK=${VOLSTACK:-$HERE/build/tools/volstack}
[ -x "$VOLSTACK" ] || { echo "set VOLSTACK to the volstack binary" >&2; exit 2; }
for c in dbench fio mkfs.xfs losetup python3; do
  command -v $c >/dev/null || { echo "needs $c" >&2; exit 2; }
done

W=$(mktemp -d "${DIR:-/tmp}/export-bench.XXXXXX")
FILE=$W/backing.img
STATE=$W/state
mkdir -p "$STATE" "$W/mnt"
CLEANUPS=()
cleanup() {
  set +e
  local i
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[$i]}" >/dev/null 2>&1; done
  CLEANUPS=()
}
final() { cleanup; rm -rf "$W"; }
trap final EXIT
trap 'exit 130' INT TERM
defer() { CLEANUPS+=("$*"); }
stop_pid() { echo "kill $1; for _ in \$(seq 100); do kill -0 $1 || break; sleep 0.1; done; kill -9 $1"; }
wait_for() { for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }

# The backing file is written once, in full, and mkfs does not discard: every stack then works
# on the same fully allocated file (no first-write allocation for some stacks and not others,
# and no slow discards through the host file system between stacks).
truncate -s "$SIZE" "$FILE"
if [ "$PREFILL" = 1 ]; then
  dd if=/dev/zero of="$FILE" bs=1M count="$(($(stat -c %s "$FILE") >> 20))" oflag=direct \
    conv=notrunc status=none
  MKFS_OPTS=(-K)
else
  MKFS_OPTS=()
fi
RESULTS=$W/results.txt
: >"$RESULTS"

# --- the loop stacks: each sets BACK to the file a loop device should be bound to ---
# (They run in this shell, not in $(...), so what they defer is undone by cleanup.)
setup_plain() { BACK=$FILE; }
setup_volstack() {  # [devfs options...]: the environment comes from DEVFS_ENV
  local stats=()
  [ "$STATS" = 1 ] && stats=("VOLSTACK_DEVFS_STATS=$W/stats.txt")
  rm -f "$W/stats.txt"
  # shellcheck disable=SC2086
  env "${stats[@]}" "${DEVFS_ENV[@]}" nice -n "$DEVFS_NICE" "$DEVFS_BIN" --state-dir "$STATE" devfs --devfs "$W/vsdev" \
    $DEVFS_OPTS "$@" disk="$FILE" >&2
  defer "$(stop_pid "$(cat "$STATE/devfs.pid")")"
  # devfs runs in a session of its own, so under autogroup scheduling its nice value only
  # ranks its own threads: the group's nice is what competes with other sessions.
  if [ "$DEVFS_NICE" != 0 ] && [ -e "/proc/$(cat "$STATE/devfs.pid")/autogroup" ]; then
    echo "$DEVFS_NICE" >"/proc/$(cat "$STATE/devfs.pid")/autogroup"
  fi
  BACK=$W/vsdev/disk
}
# A --variant: split its words into devfs options, loop sysfs settings and environment.
setup_variant() {
  local w opts=()
  LOOP_SYSFS=()
  for w in ${VARIANTS[$STACK]}; do
    case $w in
      bin:*) DEVFS_BIN=${w#bin:} ;;
      loop:*) LOOP_SYSFS+=("${w#loop:}") ;;
      env:*) DEVFS_ENV+=("${w#env:}") ;;
      nice:*) DEVFS_NICE=${w#nice:} ;;
      *) opts+=("$w") ;;
    esac
  done
  setup_volstack "${opts[@]}"
}
setup_nbdfuse() {
  command -v nbdkit >/dev/null && command -v nbdfuse >/dev/null || return 1
  rm -f "$W/nbdkit.sock" "$W/nbdkit.pid" "$W/nbdfuse.pid"
  nbdkit --unix "$W/nbdkit.sock" -P "$W/nbdkit.pid" file "$FILE" >&2
  wait_for "$W/nbdkit.pid"
  defer "$(stop_pid "$(cat "$W/nbdkit.pid")")"
  mkdir -p "$W/nbdfuse"
  nbdfuse -P "$W/nbdfuse.pid" "$W/nbdfuse/disk" --unix "$W/nbdkit.sock" >&2 &
  wait_for "$W/nbdfuse.pid"
  wait_for "$W/nbdfuse/disk"
  defer "fusermount3 -u $W/nbdfuse; $(stop_pid "$(cat "$W/nbdfuse.pid")")"
  BACK=$W/nbdfuse/disk
}
setup_qsd() {
  command -v qemu-storage-daemon >/dev/null || return 1
  touch "$W/qsd.img"
  qemu-storage-daemon --daemonize --pidfile "$W/qsd.pid" \
    --blockdev "driver=file,node-name=f,filename=$FILE,cache.direct=off" \
    --export "type=fuse,id=e,node-name=f,mountpoint=$W/qsd.img,writable=on" >&2
  defer "fusermount3 -u $W/qsd.img; $(stop_pid "$(cat "$W/qsd.pid")")"
  BACK=$W/qsd.img
}

loop_attach() {  # file -> loop device
  if [ "$1" = "$FILE" ] || [ "$BACK" != "$W/vsdev/disk" ]; then
    # shellcheck disable=SC2086
    losetup -f --show ${LOOP_OPTS//--sector-size/-b} "$1"
  else
    # shellcheck disable=SC2086
    "$VOLSTACK" --state-dir "$STATE" losetup --devfs "$W/vsdev" -f --show $LOOP_OPTS disk
  fi
}

fio_iops() {  # fio args... -> total IOPS ("-" if fio failed)
  fio --output-format=json --output="$W/fio.json" --name=r --rw=randrw --bs=4k --iodepth=32 \
    --runtime="$FIO_TIME" --time_based --group_reporting "$@" >/dev/null 2>&1 || true
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(int(j["read"]["iops"]+j["write"]["iops"]))' \
    "$W/fio.json" 2>/dev/null || echo -
}

# Drops the backing file's pages from the host page cache, so no stack reads what the stack
# before it left there (devfs reads the file through the page cache; a plain loop with
# direct I/O does not).
drop_cache() {
  sync "$FILE"
  python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$FILE"
}

run_loop_stack() {
  STACK=$1
  local loop
  drop_cache
  BACK=""
  DEVFS_ENV=()
  DEVFS_NICE=0
  DEVFS_BIN=$VOLSTACK
  LOOP_SYSFS=()
  local setup=setup_$STACK
  [ -n "${VARIANTS[$STACK]+x}" ] && setup=setup_variant
  $setup >&2 || { echo "$STACK: not available" >&2; cleanup; return 0; }
  loop=$(loop_attach "$BACK")
  defer "losetup -d $loop"
  local kv
  for kv in "${LOOP_SYSFS[@]}"; do
    echo "${kv#*=}" >"/sys/block/${loop#/dev/}/${kv%%=*}"
  done
  mkfs.xfs -q -f "${MKFS_OPTS[@]}" "$loop"
  mount "$loop" "$W/mnt"
  defer "umount $W/mnt"
  local st0 st1
  st0=$(cat "/sys/block/${loop#/dev/}/stat")
  (cd "$W/mnt" && dbench -t "$DBENCH_TIME" "$CLIENTS" >"$W/dbench.out" 2>&1)
  st1=$(cat "/sys/block/${loop#/dev/}/stat")
  umount "$W/mnt"
  # What the loop device itself saw during dbench (block layer counters: requests and the
  # milliseconds they took, /sys/block/loopN/stat): per-request write and flush latency.
  python3 -c 'import sys
a, b = (list(map(int, s.split())) for s in sys.argv[1:3])
d = [y - x for x, y in zip(a, b)]
avg = lambda n, t: f"{t / n:.2f}" if n else "-"
print(f"loop {sys.argv[3]} dbench: writes {d[4]} avg {avg(d[4], d[7])} ms, flushes {d[15]}"
      f" avg {avg(d[15], d[16])} ms")' "$st0" "$st1" "$STACK" | tee -a "$W/loopstat.txt" >&2
  local tput flush_avg flush_max iops
  tput=$(awk '/^Throughput/ {print $2}' "$W/dbench.out")
  flush_avg=$(awk '$1 == "Flush" {print $3}' "$W/dbench.out")
  flush_max=$(awk '$1 == "Flush" {print $4}' "$W/dbench.out")
  iops=$(fio_iops --filename="$loop" --ioengine=libaio --direct=1 --size=1G)
  echo "loop $STACK ${tput:--} ${flush_avg:--} ${flush_max:--} $iops" | tee -a "$RESULTS" >&2
  cleanup
  if [ -s "$W/stats.txt" ]; then
    sed "s/^/$STACK: /" "$W/stats.txt" >&2
    rm -f "$W/stats.txt"
  fi
}

run_nbd_server() {
  local server=$1 uri
  drop_cache
  local bin=$VOLSTACK nbd_opts=$NBD_OPTS w server_kind
  if [ -n "${VARIANTS[$server]+x}" ]; then  # a volstack server with other options or binary
    nbd_opts=""
    for w in ${VARIANTS[$server]}; do
      case $w in
        bin:*) bin=${w#bin:} ;;
        *) nbd_opts="$nbd_opts $w" ;;
      esac
    done
    server_kind=volstack
  else
    server_kind=$server
  fi
  case $server_kind in
    volstack)
      # shellcheck disable=SC2086
      "$bin" --state-dir "$STATE" nbd serve --socket "$W/vs.sock" $nbd_opts disk="$FILE"
      defer "$(stop_pid "$(cat "$STATE/nbd.pid")")"
      uri="nbd+unix:///disk?socket=$W/vs.sock" ;;
    nbdkit)
      command -v nbdkit >/dev/null || return 0
      rm -f "$W/nk.sock" "$W/nk.pid"
      nbdkit --unix "$W/nk.sock" -P "$W/nk.pid" file "$FILE"
      wait_for "$W/nk.pid"
      defer "$(stop_pid "$(cat "$W/nk.pid")")"
      uri="nbd+unix:///?socket=$W/nk.sock" ;;
    qemu-nbd)
      command -v qemu-nbd >/dev/null || return 0
      rm -f "$W/qn.sock" "$W/qn.pid"
      qemu-nbd -f raw -k "$W/qn.sock" --pid-file "$W/qn.pid" -t --fork "$FILE"
      wait_for "$W/qn.pid"
      defer "$(stop_pid "$(cat "$W/qn.pid")")"
      uri="nbd+unix:///?socket=$W/qn.sock" ;;
  esac
  local iops
  iops=$(fio_iops --ioengine=nbd --uri="$uri" --size=1G)
  echo "nbd $server - - - $iops" | tee -a "$RESULTS" >&2
  cleanup
}

echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)" >"$W/load.txt"
for ((round = 1; round <= ROUNDS; round++)); do
  for s in ${STACKS//,/ }; do run_loop_stack "$s"; done
  for s in ${NBDS//,/ }; do run_nbd_server "$s"; done
done

echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$W/load.txt"

python3 - "$RESULTS" "$CLIENTS" "$DBENCH_TIME" "$FIO_TIME" "$SIZE" "$LOOP_OPTS" "$ROUNDS" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    kind, name, tput, favg, fmax, iops = line.split()
    rows[(kind, name)].append((tput, favg, fmax, iops))
def med(vals):
    vals = [float(v) for v in vals if v != "-"]
    return statistics.median(vals) if vals else None
def spread(vals, f):
    vals = [float(v) for v in vals if v != "-"]
    return f"{min(vals):{f}}-{max(vals):{f}}" if len(vals) > 1 else ""
rounds = int(sys.argv[7])
print(f"dbench {sys.argv[2]} clients {sys.argv[3]} s on XFS; fio 4 KiB QD32 randrw {sys.argv[4]} s;"
      f" backing file {sys.argv[5]}; loops: {sys.argv[6]}; rounds: {rounds}"
      + (" (median, min-max)" if rounds > 1 else ""))
print(f"{'stack':<22}{'dbench MB/s':>12}{'':>12}{'ratio':>7}{'Flush avg':>10}{'Flush max':>10}"
      f"{'max ratio':>10}{'fio IOPS':>10}{'':>14}{'ratio':>7}")
base = {k: [med(c) for c in zip(*v)] for k, v in rows.items()}
cols = {k: list(zip(*v)) for k, v in rows.items()}
plain = base.get(("loop", "plain"))
nbdkit = base.get(("nbd", "nbdkit"))
for (kind, name), (tput, favg, fmax, iops) in base.items():
    ref = plain if kind == "loop" else nbdkit
    fmt = lambda v, f: f"{v:{f}}" if v is not None else "-"
    ratio = lambda a, b: f"{a / b:.2f}" if a is not None and b else "-"
    label = f"{kind}: {name}"
    c = cols[(kind, name)]
    print(f"{label:<22}{fmt(tput, '12.1f'):>12}{spread(c[0], '.0f'):>12}"
          f"{ratio(tput, ref[0] if ref else None):>7}"
          f"{fmt(favg, '10.2f'):>10}{fmt(fmax, '10.1f'):>10}"
          f"{ratio(fmax, ref[2] if ref else None):>10}{fmt(iops, '10.0f'):>10}"
          f"{spread(c[3], '.0f'):>14}{ratio(iops, ref[3] if ref else None):>7}")
# Ratios within each round (the stacks of a round ran back to back, under the same load).
refs = {"loop": rows.get(("loop", "plain")), "nbd": rows.get(("nbd", "nbdkit"))}
for (kind, name), runs in rows.items():
    ref = refs[kind]
    if rounds < 2 or not ref or (kind, name) in (("loop", "plain"), ("nbd", "nbdkit")):
        continue
    def per_round(i):
        out = []
        for r, b in zip(runs, ref):
            if r[i] != "-" and b[i] != "-" and float(b[i]):
                out.append(float(r[i]) / float(b[i]))
        return " ".join(f"{v:.2f}" for v in out)
    if kind == "loop":
        print(f"per round, {name}: dbench ratio {per_round(0)}; Flush max ratio {per_round(2)};"
              f" fio ratio {per_round(3)}")
    else:
        print(f"per round, {name}: fio ratio {per_round(3)}")
PY
cat "$W/loopstat.txt" 2>/dev/null || true
cat "$W/load.txt"
