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

bind_and_mount() {
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show rz/vol)
  on_exit_detach_loop "$LOOP"
  mount "$LOOP" "$T/mnt"
}
unmount_and_unbind() {
  umount "$T/mnt"
  timeout 20 "$VOLSTACK" losetup -d "$LOOP"
}
status() { timeout 20 "$VOLSTACK" zpool status -v rz; }
cksum_of() { awk -v f="$1" '$1 == f {print $5}' "$2"; }

# 1. Files.
LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show rz/vol)
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
timeout 30 "$VOLSTACK" zpool scrub -w rz
status >"$T/st2"
grep -Eq "scan: scrub repaired [0-9.]+[KMG] in [0-9:]+ with 0 errors on" "$T/st2" ||
  fail "scrub repaired nothing: $(cat "$T/st2")"
timeout 30 "$VOLSTACK" zpool scrub -w rz
status >"$T/st3"
grep -q "scan: scrub repaired 0B in .* with 0 errors" "$T/st3" || fail "second scrub: $(cat "$T/st3")"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "files read wrong after scrub"

# 4. One column lost.
unmount_and_unbind
timeout 30 "$VOLSTACK" down
rm "$T/c.img"
timeout 30 "$VOLSTACK" up
status >"$T/st4"
grep -q "^ state: DEGRADED" "$T/st4" || fail "not DEGRADED: $(cat "$T/st4")"
grep -Eq "^\s+$T/c.img\s+UNAVAIL" "$T/st4" || fail "c.img not UNAVAIL: $(cat "$T/st4")"
bind_and_mount
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "files read wrong when degraded"

# 6. Bad input changes nothing.
expect_fail timeout 30 "$VOLSTACK" zpool attach rz "$T/a.img" "$T/e.img"
grep -q "raidz" "$T/expect_fail.err" || fail "attach to a raidz: $(cat "$T/expect_fail.err")"
status >"$T/st5"
diff <(grep -v "scan:" "$T/st4") <(grep -v "scan:" "$T/st5") || fail "a failed attach changed the pool"

# 5. Replace and resilver, then lose another old column.
timeout 30 "$VOLSTACK" zpool replace rz "$T/c.img" "$T/d.img"
status >"$T/st6"
grep -q "^ state: ONLINE" "$T/st6" || fail "not ONLINE after replace: $(cat "$T/st6")"
grep -Eq "^\s+$T/d.img\s+ONLINE" "$T/st6" || fail "d.img not ONLINE: $(cat "$T/st6")"
grep -Eq "scan: resilvered [0-9.]+[KMG] in .* with 0 errors" "$T/st6" || fail "no resilver: $(cat "$T/st6")"
unmount_and_unbind
timeout 30 "$VOLSTACK" down
rm "$T/a.img"
timeout 30 "$VOLSTACK" up
bind_and_mount
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "b.img and d.img do not hold the files"
unmount_and_unbind
echo PASS
