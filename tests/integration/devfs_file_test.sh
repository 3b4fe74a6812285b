#!/bin/bash
# devfs over file-backed devices, checked with real programs: the files appear under their
# names with the right size and st_blksize; dd/cmp round-trip through devfs to the backing
# file (aligned, unaligned and O_DIRECT); fallocate punch/zero; SEEK_DATA/SEEK_HOLE;
# qemu-img info/compare; mkfs.xfs on the devfs file; a clean stop unmounts.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd dd cmp qemu-img mkfs.xfs xfs_repair fallocate python3
[ -c /dev/fuse ] || skip "needs /dev/fuse"

truncate -s 512M "$T/a.img"
truncate -s 64M "$T/b.img"
DEV=$VS_STATE/dev
vs devfs "$T/a.img" grp/b="$T/b.img" 2>"$T/devfs.err" || fail "devfs: $(cat "$T/devfs.err")"
PID=$(cat "$VS_STATE/devfs.pid")
on_exit_kill "$PID"
mountpoint -q "$DEV" || fail "devfs not mounted at $DEV"
# devfs says which FUSE transport serves it (the one asked for, when one was).
grep -q "FUSE transport ${VOLSTACK_FUSE_TRANSPORT:-}" "$T/devfs.err" ||
  fail "devfs does not say it serves through ${VOLSTACK_FUSE_TRANSPORT:-some} transport: $(cat "$T/devfs.err")"

# Names, sizes, block size.
[ "$(stat -c %s "$DEV/a.img")" = $((512 << 20)) ] || fail "a.img size"
[ "$(stat -c %s "$DEV/grp/b")" = $((64 << 20)) ] || fail "grp/b size"
[ "$(stat -c %o "$DEV/a.img")" = 4096 ] || fail "st_blksize is not the physical block size"
[ "$(ls "$DEV")" = "$(printf 'a.img\ngrp')" ] || fail "listing: $(ls "$DEV")"
[ -e "$DEV/missing" ] && fail "a missing device exists"

# Aligned data round trip, both ways.
head -c 8M /dev/urandom >"$T/r.bin"
dd if="$T/r.bin" of="$DEV/a.img" bs=1M seek=3 conv=notrunc status=none
cmp -n $((8 << 20)) "$T/r.bin" <(dd if="$T/a.img" bs=1M skip=3 count=8 status=none) ||
  fail "backing file differs after a write through devfs"
dd if="$T/r.bin" of="$T/b.img" bs=1M count=2 conv=notrunc status=none
cmp -n $((2 << 20)) "$T/r.bin" "$DEV/grp/b" || fail "devfs read differs from the backing file"

# Unaligned writes (read-modify-write) and O_DIRECT.
printf 'hello' | dd of="$DEV/a.img" bs=1 seek=1001 conv=notrunc status=none
[ "$(dd if="$T/a.img" bs=1 skip=1001 count=5 status=none)" = hello ] || fail "unaligned write"
cmp -n 1001 /dev/zero "$T/a.img" || fail "unaligned write clobbered its neighbours"
dd if="$T/r.bin" of="$DEV/a.img" bs=4096 seek=1000 count=16 oflag=direct conv=notrunc status=none
cmp -n 65536 "$T/r.bin" <(dd if="$DEV/a.img" bs=4096 skip=1000 count=16 iflag=direct status=none) ||
  fail "O_DIRECT round trip"

# Punch hole and zero range read back as zeroes; SEEK_DATA/SEEK_HOLE see the hole.
fallocate -p -o 4M -l 1M "$DEV/a.img"
cmp -n $((1 << 20)) /dev/zero <(dd if="$DEV/a.img" bs=1M skip=4 count=1 status=none) ||
  fail "punched range is not zero"
fallocate -z -o $((6 << 20)) -l 100 "$DEV/a.img"
cmp -n 100 /dev/zero <(dd if="$DEV/a.img" bs=1 skip=$((6 << 20)) count=100 status=none) ||
  fail "zero range is not zero"
cmp -s -n 100 "$T/r.bin" <(dd if="$DEV/a.img" bs=1 skip=$((6 << 20)) count=100 status=none) &&
  fail "zero range did nothing"
python3 - "$DEV/a.img" <<'PY' || fail "SEEK_DATA/SEEK_HOLE"
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
assert os.lseek(fd, 0, os.SEEK_DATA) == 0, "data at 0"
assert os.lseek(fd, 2 << 20, os.SEEK_DATA) == 3 << 20, os.lseek(fd, 2 << 20, os.SEEK_DATA)
hole = os.lseek(fd, 3 << 20, os.SEEK_HOLE)
assert hole == 4 << 20, hole
PY

# qemu-img sees a raw image identical to the backing file.
qemu-img info -f raw "$DEV/a.img" | grep -q 'virtual size: 512 MiB' || fail "qemu-img info"
qemu-img compare -q -f raw -F raw "$DEV/a.img" "$T/a.img" || fail "qemu-img compare"

# mkfs.xfs on the devfs file itself; xfs_repair -n checks it through the backing file.
mkfs.xfs -q -f "$DEV/a.img" || fail "mkfs.xfs on the devfs file"
xfs_repair -n -f "$T/a.img" >/dev/null 2>&1 || fail "xfs_repair rejects what mkfs.xfs wrote"

# A read-only open of a writable device works; a write to a missing name does not.
expect_fail dd if=/dev/zero of="$DEV/nope" bs=4096 count=1 status=none

# Clean stop: SIGTERM unmounts and removes the pid file.
kill "$PID"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PID" 2>/dev/null && fail "devfs did not stop"
mountpoint -q "$DEV" && fail "devfs still mounted after stop"
[ -e "$VS_STATE/devfs.pid" ] && fail "pid file left behind"
echo PASS
