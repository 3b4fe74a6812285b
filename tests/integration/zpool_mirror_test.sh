#!/bin/bash
# A 2-way mirror of two files under XFS, through the daemon:
#   1. zpool create mirror; XFS on a loop over a volume; files written, checksummed;
#   2. while mounted, 10% of a.img's data area is overwritten with random bytes; the files
#      read back right (reads heal from b.img); zpool status shows a.img's CKSUM count;
#   3. zpool scrub repairs the rest ("scrub repaired ... with 0 errors"); a second scrub
#      repairs nothing;
#   4. b.img deleted, down/up: the pool is DEGRADED (b.img UNAVAIL) and the files intact;
#   5. zpool replace b.img c.img resilvers: ONLINE; a.img deleted too, down/up: c.img alone
#      holds the files.
#   6. bad input: a mirror of one device, a replace naming no device of the pool: one error,
#      nothing changed.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount sha256sum python3
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

truncate -s 512M "$T/a.img" "$T/b.img" "$T/c.img" "$T/d.img"
expect_fail vs zpool create mir mirror "$T/a.img" "$T/d.img" mirror "$T/c.img"
grep -q "mirror requires at least 2 devices" "$T/expect_fail.err" || fail "one-device mirror: $(cat "$T/expect_fail.err")"
vs zpool create mir mirror "$T/a.img" "$T/b.img"
# A small cache, so reads reach the vdevs.
vs zpool set cachemax=16M mir
vs zfs create -s -b 4K -V 320M mir/vol
on_exit_stop_daemon
timeout 30 "$VOLSTACK" up
on_exit "umount -l $VS_STATE/dev"
mkdir -p "$T/mnt"

POOL=mir
source "$(dirname "$0")/redundancy_lib.sh"

# 1. Files.
LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "$POOL/vol")
on_exit_detach_loop "$LOOP"
mkfs.xfs -q "$LOOP"
mount "$LOOP" "$T/mnt"
on_exit_umount "$T/mnt"
for i in 1 2 3 4 5 6; do head -c $((i * 3 * 1024 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f*) >"$T/manifest"
sync

# 2. Rot on a.img while mounted: 64 KiB of random bytes in every 640 KiB of its data area
# ([1M, size - 512K): docs/format/pool.md).
python3 - "$T/a.img" <<'PY'
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
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "files read wrong after rot on one copy"
status >"$T/st1"
cksum_a=$(awk -v f="$T/a.img" '$1 == f {print $5}' "$T/st1")
cksum_b=$(awk -v f="$T/b.img" '$1 == f {print $5}' "$T/st1")
[ -n "$cksum_a" ] && [ "$cksum_a" != 0 ] || fail "no CKSUM count on a.img: $(cat "$T/st1")"
[ "$cksum_b" = 0 ] || fail "CKSUM on the good copy: $(cat "$T/st1")"
grep -q "errors: No known data errors" "$T/st1" || fail "data errors reported: $(cat "$T/st1")"

# 3. Scrub.
scrub_repairs_then_finds_nothing

# 4. One copy lost.
restart_without "$T/b.img"
expect_degraded_without "$T/b.img"
check_files "when degraded"

# 6. Bad input changes nothing.
expect_fail timeout 30 "$VOLSTACK" zpool replace mir "$T/nosuch.img" "$T/d.img"
grep -q "no such device" "$T/expect_fail.err" || fail "replace of no device: $(cat "$T/expect_fail.err")"
status >"$T/st5"
diff <(grep -v "scan:" "$T/degraded") <(grep -v "scan:" "$T/st5") || fail "a failed replace changed the pool"

# 5. Replace and resilver, then lose the other old copy.
replace_resilvers "$T/b.img" "$T/c.img"
restart_without "$T/a.img"
check_files "with c.img alone"
unmount_and_unbind
echo PASS
