#!/usr/bin/env bash
# The OSD stopped under a pool on an RBD image: writes fail with EIO and the reason (librbd
# gives up after rados_osd_op_timeout, set to 5 s in the device name), nothing hangs, and the
# failed commit suspends the pool. `zpool clear` refuses while the OSD is down; once it is
# back, `zpool clear` resumes the pool in the running daemon (no restart): the write that
# failed is made again, and everything acknowledged before and after reads back, also after
# `down` and `up`.
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

# While the OSD is down, clear refuses with one error and the pool stays suspended.
expect_fail timeout -k 5 60 "$VOLSTACK" zpool clear p
grep -q "still suspended" "$T/expect_fail.err" || fail "clear: $(cat "$T/expect_fail.err")"

"$CEPH_SCRIPT" start-osd "$T/ceph" || fail "the OSD did not restart"
# The OSD takes a few seconds to rejoin; clear is refused until it answers.
cleared=0
for _ in $(seq 20); do
  if timeout -k 5 60 "$VOLSTACK" zpool clear p 2>"$T/clear.err"; then
    cleared=1
    break
  fi
  sleep 1
done
((cleared)) || fail "zpool clear after the OSD returned: $(cat "$T/clear.err")"
vs zpool status p | grep -q SUSPENDED && fail "still suspended after clear"
# The same daemon serves on: the failed write again, then both read back.
timeout -k 5 60 dd if="$T/b" of="$DEV" bs=1M seek=32 conv=fsync,notrunc status=none ||
  fail "write after clear"
timeout -k 5 60 dd if="$DEV" of="$T/back" bs=1M count=64 status=none || fail "read back"
cat "$T/a" "$T/b" | cmp - "$T/back" || fail "data differs after clear"
timeout -k 5 60 "$VOLSTACK" down || fail "down after clear"
umount -l "$VS_STATE/dev" 2>/dev/null || true
timeout -k 5 60 "$VOLSTACK" up || fail "up"
timeout -k 5 60 dd if="$DEV" of="$T/back" bs=1M count=64 status=none || fail "read back after up"
cat "$T/a" "$T/b" | cmp - "$T/back" || fail "acknowledged data lost after down and up"
timeout -k 5 60 "$VOLSTACK" down || fail "down"
echo PASS
