# Shared helpers for integration tests (source this file). Each test:
#   - gets a private scratch dir $T and a private state dir $VS_STATE (so stacks never collide);
#   - registers what it sets up (on_exit_umount, on_exit_detach_loop, on_exit_kill) so the EXIT
#     trap undoes it in reverse order, even when the test fails;
#   - stops only the processes it started, by PID.
# Tests need root; without it (or without a kernel feature) they print SKIP and exit 77,
# which CTest reports as skipped.
set -euo pipefail

VOLSTACK=${VOLSTACK:?VOLSTACK must point at the volstack binary}
T=$(mktemp -d /tmp/volstack-test.XXXXXX)
VS_STATE=$T/state
mkdir -p "$VS_STATE"
export VOLSTACK_STATE_DIR=$VS_STATE

_cleanups=()
_run_cleanups() {
  local rc=$?
  set +e
  local i
  for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do
    eval "${_cleanups[$i]}" >/dev/null 2>&1
  done
  rm -rf "$T"
  exit $rc
}
trap _run_cleanups EXIT
trap 'exit 130' INT TERM

on_exit() { _cleanups+=("$*"); }
on_exit_umount() { on_exit "umount $1 || umount -l $1"; }
# A loop number is reused as soon as it is free: a test that detached its loop itself must not
# detach, at exit, whatever another test has bound to that number since. So only a loop whose
# backing file is still under $T is detached.
detach_loop_if_ours() {
  local back
  back=$(losetup -n -O BACK-FILE "$1" 2>/dev/null) || return 0
  case "$back" in "$T"/*) losetup -d "$1" ;; esac
}
on_exit_detach_loop() { on_exit "detach_loop_if_ours $1"; }
# Kills a PID we started and waits for it, so nothing outlives the test.
on_exit_kill() { on_exit "kill $1; for _ in \$(seq 50); do kill -0 $1 || break; sleep 0.1; done; kill -9 $1; wait $1"; }

# Stops, at exit, the daemon this test's `volstack up` starts: `down --force`, then the PID in
# daemon.pid if it is still volstack and still running (a wedged daemon must not outlive the
# test). Call it before the first `up`, so an `up` that fails half way is cleaned up too.
_daemon_stop_registered=0
stop_daemon() {
  timeout 30 "$VOLSTACK" down --force
  local pid
  pid=$(cat "$VS_STATE/daemon.pid" 2>/dev/null) || return 0
  [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$VOLSTACK")" ] || return 0
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" || return 0; sleep 0.1; done
  kill -9 "$pid"
}
on_exit_stop_daemon() {
  ((_daemon_stop_registered)) && return 0
  _daemon_stop_registered=1
  on_exit stop_daemon
}

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
need_root() { [ "$(id -u)" = 0 ] || skip "needs root"; }
need_cmd() { for c in "$@"; do command -v "$c" >/dev/null || skip "needs $c"; done; }

vs() { "$VOLSTACK" "$@"; }

# Runs a command that must fail with a non-zero status; prints its stderr on unexpected success.
expect_fail() {
  if "$@" 2>"$T/expect_fail.err"; then
    fail "expected failure: $*"
  fi
}

# An lvm2 environment that needs no device-mapper and touches nothing of the host's.
setup_lvm2_env() {
  export LVM_SYSTEM_DIR=$T/lvm
  export LVM_SUPPRESS_FD_WARNINGS=1
  mkdir -p "$LVM_SYSTEM_DIR" "$T/lvm/lock" "$T/lvm/backup" "$T/lvm/archive"
  cat >"$LVM_SYSTEM_DIR/lvm.conf" <<CONF
devices { use_devicesfile = 0 obtain_device_list_from_udev = 0 hints = "none" }
activation { udev_sync = 0 udev_rules = 0 }
global { locking_dir = "$T/lvm/lock" activation = 0 }
backup { backup = 0 archive = 0 backup_dir = "$T/lvm/backup" archive_dir = "$T/lvm/archive" }
CONF
}

# A loop device over a new sparse file $T/NAME.img, detached on exit: new_loop NAME SIZE
# sets $LOOP.
new_loop() {
  truncate -s "$2" "$T/$1.img"
  LOOP=$(losetup -f --show "$T/$1.img")
  on_exit_detach_loop "$LOOP"
}

# lvm2's --config for a test: activation off, and only the given devices visible (other
# tests may have loop devices of their own). Sets the array LC.
lvm2_config_for() {
  local filter="" dev
  for dev in "$@"; do filter+="\"a|^$dev\$|\", "; done
  LC=(--config "global{activation=0} devices{global_filter=[ ${filter}\"r|.*|\" ]}")
}

# A loop device bound to the volstack device $1 through devfs, XFS made on it and mounted at
# $T/mnt, all undone at exit. Sets $loop.
mount_new_xfs_on() {
  loop=$(timeout -k 5 20 "$VOLSTACK" losetup -f --show "$1") || fail "losetup $1"
  on_exit_detach_loop "$loop"
  mkfs.xfs -q "$loop"
  mkdir -p "$T/mnt"
  mount "$loop" "$T/mnt"
  on_exit_umount "$T/mnt"
}

# A writer adding files under $T/mnt until stop_manifest_writer. A file enters $T/manifest
# (with its checksum) only after its fsync returned, so every line is acknowledged data.
start_manifest_writer() {
  : >"$T/manifest"
  (
    i=0
    while [ ! -e "$T/stop" ]; do
      i=$((i + 1))
      head -c $((16 + RANDOM % 200))K /dev/urandom >"$T/mnt/w$i" && sync "$T/mnt/w$i" &&
        (cd "$T/mnt" && sha256sum "w$i" >>"$T/manifest")
    done
  ) &
  _writer_pid=$!
  on_exit "touch $T/stop; wait $_writer_pid"
}
# Stops the writer; fails unless it wrote more than five files. Sets $n to their count.
stop_manifest_writer() {
  touch "$T/stop"
  wait "$_writer_pid"
  n=$(wc -l <"$T/manifest")
  [ "$n" -gt 5 ] || fail "the writer wrote only $n files"
}
# Every file of the manifest read back from the device, not the page cache: verify_manifest WHEN
verify_manifest() {
  sync
  echo 3 >/proc/sys/vm/drop_caches
  (cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest $1"
}

# Waits up to 5 s until an NBD server answers on the Unix socket $1: the socket file exists
# from bind(), before the server listens, so its presence alone is no sign of readiness.
wait_for_nbd_socket() {
  for _ in $(seq 100); do
    timeout 2 nbdinfo --size "nbd+unix:///?socket=$1" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  fail "no NBD server answered on $1"
}
