#!/usr/bin/env bash
# The OSD stopped under a pool on an RBD image: writes fail with EIO and the reason (librbd
# gives up after rados_osd_op_timeout, set to 5 s in the device name), nothing hangs, and
# everything acknowledged before (written and fsync'ed through devfs) reads back intact
# once the OSD is back and the daemon has been restarted (the failed commit suspended the
# pool; there is no `zpool clear` yet).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ceph_lib.sh"
need_root
need_cmd cmp
[ -e /dev/fuse ] || skip "needs /dev/fuse"
start_ceph_cluster

rbd_create v 512M
R="$(rbd_name v):rados_osd_op_timeout=5"
timeout -k 5 30 "$VOLSTACK" zpool create p "$R" || fail "zpool create"
vs zfs create -V 128M p/vol
on_exit_stop_daemon
timeout -k 5 60 "$VOLSTACK" up || fail "up"
on_exit "umount -l $VS_STATE/dev"
DEV=$VS_STATE/dev/p/vol
head -c 32M /dev/urandom >"$T/a"
head -c 32M /dev/urandom >"$T/b"
timeout -k 5 60 dd if="$T/a" of="$DEV" bs=1M conv=fsync,notrunc status=none || fail "write a"

"$CEPH_SCRIPT" stop-osd "$T/ceph"
start=$(date +%s)
if timeout -k 5 90 dd if="$T/b" of="$DEV" bs=1M seek=32 conv=fsync,notrunc status=none \
  2>"$T/dd.err"; then
  fail "a write with the OSD down was acknowledged"
fi
echo "the write failed after $(($(date +%s) - start)) s: $(head -n 1 "$T/dd.err")"
grep -q "Input/output error" "$T/dd.err" || fail "not EIO: $(cat "$T/dd.err")"
vs zpool status p >"$T/status" 2>&1 || true
grep -qi "timed out\|error" "$T/status" || fail "status shows no error: $(cat "$T/status")"

"$CEPH_SCRIPT" start-osd "$T/ceph" || fail "the OSD did not restart"
# The failed commit suspended the pool (pool_impl.h): it flushes nothing more, so `down`
# refuses, naming why, and the way out is a restart of the daemon, as after a crash.
expect_fail timeout -k 5 60 "$VOLSTACK" down --force
grep -q "suspended" "$T/expect_fail.err" || fail "down: $(cat "$T/expect_fail.err")"
daemon_pid=$(cat "$VS_STATE/daemon.pid")
kill -9 "$daemon_pid"
for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
umount -l "$VS_STATE/dev" 2>/dev/null || true
timeout -k 5 60 "$VOLSTACK" up || fail "up after the OSD returned"
timeout -k 5 60 dd if="$DEV" of="$T/back" bs=1M count=32 status=none || fail "read back"
cmp "$T/a" "$T/back" || fail "acknowledged data lost after the OSD came back"
timeout -k 5 60 "$VOLSTACK" down || fail "down"
echo PASS
