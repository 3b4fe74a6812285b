#!/bin/bash
# A raidz1 of three files under XFS, through the daemon:
#   1. zpool create raidz1; XFS on a loop over a volume; files written, checksummed;
#   2. while mounted, 10% of b.img's data area (a data column: a.img holds parity) is
#      overwritten with random bytes; the files read back right (rebuilt from parity);
#      zpool status shows b.img's CKSUM count and none on the others;
#   3. zpool scrub repairs the rest ("scrub repaired ... with 0 errors"); a second scrub
#      repairs nothing;
#   4. c.img deleted, down/up: the pool is DEGRADED (c.img UNAVAIL) and the files intact;
#   5. zpool replace c.img d.img resilvers: ONLINE; a.img deleted, down/up: b.img and d.img
#      hold the files.
#   6. bad input: a raidz1 of one device, a raidz2 of two, zpool attach to a raidz: one
#      error each, nothing changed.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount sha256sum python3
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

truncate -s 320M "$T/a.img" "$T/b.img" "$T/c.img" "$T/d.img" "$T/e.img"
expect_fail vs zpool create rz raidz "$T/a.img"
grep -q "raidz1 requires at least 2 devices" "$T/expect_fail.err" || fail "one-device raidz: $(cat "$T/expect_fail.err")"
expect_fail vs zpool create rz raidz2 "$T/a.img" "$T/b.img"
grep -q "raidz2 requires at least 3 devices" "$T/expect_fail.err" || fail "two-device raidz2: $(cat "$T/expect_fail.err")"
vs zpool create rz raidz "$T/a.img" "$T/b.img" "$T/c.img"
vs zpool set cachemax=16M rz
vs zfs create -s -b 4K -V 320M rz/vol
on_exit_stop_daemon
timeout 30 "$VOLSTACK" up
on_exit "umount -l $VS_STATE/dev"
mkdir -p "$T/mnt"

POOL=rz
source "$(dirname "$0")/redundancy_lib.sh"
cksum_of() { awk -v f="$1" '$1 == f {print $5}' "$2"; }

# 1. Files.
LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "$POOL/vol")
on_exit_detach_loop "$LOOP"
mkfs.xfs -q "$LOOP"
mount "$LOOP" "$T/mnt"
on_exit_umount "$T/mnt"
for i in 1 2 3 4 5 6; do head -c $((i * 3 * 1024 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f*) >"$T/manifest"
sync
status >"$T/st0"
grep -Eq "^\s+raidz1-0\s+ONLINE" "$T/st0" || fail "no raidz1-0 row: $(cat "$T/st0")"

# 2. Rot on b.img while mounted: 64 KiB of random bytes in every 640 KiB of its data area
# ([1M, size - 512K): docs/format/pool.md).
python3 - "$T/b.img" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY)
size = os.fstat(fd).st_size
off = 1 << 20
while off + (64 << 10) <= size - (512 << 10):
    os.pwrite(fd, os.urandom(64 << 10), off)
    off += 640 << 10
os.fsync(fd)
os.close(fd)
PY
echo 3 >/proc/sys/vm/drop_caches
umount "$T/mnt"
mount "$LOOP" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "files read wrong after rot on one column"
status >"$T/st1"
cksum_b=$(cksum_of "$T/b.img" "$T/st1")
[ -n "$cksum_b" ] && [ "$cksum_b" != 0 ] || fail "no CKSUM count on b.img: $(cat "$T/st1")"
[ "$(cksum_of "$T/a.img" "$T/st1")" = 0 ] || fail "CKSUM on a.img: $(cat "$T/st1")"
[ "$(cksum_of "$T/c.img" "$T/st1")" = 0 ] || fail "CKSUM on c.img: $(cat "$T/st1")"
grep -q "errors: No known data errors" "$T/st1" || fail "data errors reported: $(cat "$T/st1")"

# 3. Scrub.
scrub_repairs_then_finds_nothing

# 4. One column lost.
restart_without "$T/c.img"
expect_degraded_without "$T/c.img"
check_files "when degraded"

# 6. Bad input changes nothing.
expect_fail timeout 30 "$VOLSTACK" zpool attach rz "$T/a.img" "$T/e.img"
grep -q "raidz" "$T/expect_fail.err" || fail "attach to a raidz: $(cat "$T/expect_fail.err")"
status >"$T/st5"
diff <(grep -v "scan:" "$T/degraded") <(grep -v "scan:" "$T/st5") || fail "a failed attach changed the pool"

# 5. Replace and resilver, then lose another old column.
replace_resilvers "$T/c.img" "$T/d.img"
restart_without "$T/a.img"
check_files "with b.img and d.img"
unmount_and_unbind
echo PASS
