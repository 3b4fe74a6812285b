#!/bin/bash
# devfs served through FUSE over io_uring, checked with real programs: devfs_file_test.sh
# (dd/cmp aligned, unaligned and O_DIRECT, fallocate, SEEK_DATA/SEEK_HOLE, qemu-img,
# mkfs.xfs, a clean stop) and losetup_xfs_test.sh (a loop device with XFS on a devfs file)
# run again with VOLSTACK_FUSE_TRANSPORT=uring, which makes devfs fail rather than fall back
# to /dev/fuse, and devfs_file_test.sh checks that devfs says it serves through the ring.
# The kernel offers the ring only while the fuse module's enable_uring parameter is on: it
# is set here and put back at exit, under the lock every volstack user of the parameter
# takes (export/fuse_uring_parameter.h), so a concurrent test never restores our value;
# without the parameter (a kernel before 6.14) the test is skipped.
source "$(dirname "$0")/lib.sh"
need_root
PARAM=/sys/module/fuse/parameters/enable_uring
[ -f "$PARAM" ] || skip "this kernel has no FUSE over io_uring ($PARAM)"
exec 9>/tmp/volstack-fuse-enable-uring.lock
flock -w 60 9 || fail "another test held /tmp/volstack-fuse-enable-uring.lock for 60 s"
old=$(cat "$PARAM")
on_exit "echo $old >$PARAM"
echo Y >"$PARAM" 2>/dev/null || skip "cannot set $PARAM"

export VOLSTACK_FUSE_TRANSPORT=uring
for t in devfs_file_test.sh losetup_xfs_test.sh; do
  rc=0
  timeout -k 5 50 bash "$(dirname "$0")/$t" >"$T/$t.log" 2>&1 || rc=$?
  [ $rc = 77 ] && skip "$t: $(tail -n 1 "$T/$t.log")"
  [ $rc = 0 ] || fail "$t over FUSE io_uring (exit $rc): $(tail -n 20 "$T/$t.log")"
done
echo PASS
