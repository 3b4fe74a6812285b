#!/bin/bash
# The seed's path, end to end: file device -> devfs -> volstack losetup -> mkfs.xfs -> mount
# -> write files, sync, umount, remount, verify checksums -> clean detach. Checks the loop's
# sector size (4096 by default from st_blksize, 512 when asked), direct I/O (the default;
# off when asked), util-linux's -l columns, and the bindings recorded in loops.json.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd losetup mkfs.xfs mount umount sha256sum python3
[ -c /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

truncate -s 1G "$T/disk.img"
DEV=$VS_STATE/dev
vs devfs vol="$T/disk.img"
on_exit_kill "$(cat "$VS_STATE/devfs.pid")"

LOOP=$(vs losetup -f --show --direct-io=on vol)
on_exit_detach_loop "$LOOP"
[ -b "$LOOP" ] || fail "no loop device: $LOOP"
# util-linux agrees on what was set up.
read -r name dio logsec < <(losetup -l -n -O NAME,DIO,LOG-SEC "$LOOP")
[ "$logsec" = 4096 ] || fail "default sector size $logsec, want 4096"
[ "$dio" = 1 ] || fail "direct I/O not in use"
vs losetup -l -O NAME,BACK-FILE,LOG-SEC | grep -q "^$LOOP  *$DEV/vol  *4096$" ||
  fail "volstack losetup -l: $(vs losetup -l)"
vs losetup -l | head -1 | grep -q '^NAME  *SIZELIMIT OFFSET AUTOCLEAR RO BACK-FILE  *DIO LOG-SEC$' ||
  fail "losetup -l header"
vs losetup -a | grep -q "^$LOOP: \[[0-9]*\]:[0-9]* ($DEV/vol)$" || fail "losetup -a"
python3 - "$VS_STATE/loops.json" "$LOOP" <<'PY' || fail "loops.json"
import json, sys
loops = json.load(open(sys.argv[1]))["loops"]
assert [l for l in loops if l["device"] == sys.argv[2] and l["name"] == "vol"
        and l["sector_size"] == 4096 and l["direct_io"]], loops
PY

mkfs.xfs -q "$LOOP"
mkdir "$T/mnt"
mount "$LOOP" "$T/mnt"
on_exit_umount "$T/mnt"
for i in 1 2 3 4 5; do head -c $((i * 777777)) /dev/urandom >"$T/mnt/f$i"; done
mkdir "$T/mnt/d" && cp "$T/mnt/f3" "$T/mnt/d/copy"
(cd "$T/mnt" && sha256sum f1 f2 f3 f4 f5 d/copy) >"$T/sums"
sync
umount "$T/mnt"
mount "$LOOP" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/sums") || fail "checksums differ after remount"
umount "$T/mnt"
vs losetup -d "$LOOP"
losetup "$LOOP" >/dev/null 2>&1 && fail "$LOOP still bound after -d"
python3 -c "import json,sys; assert not [l for l in json.load(open(sys.argv[1]))['loops'] if l['device']==sys.argv[2]]" \
  "$VS_STATE/loops.json" "$LOOP" || fail "detached loop still in loops.json"

# --sector-size 512 for comparison; the filesystem from before is still readable.
# Direct I/O is the default (a buffered loop serves one request at a time).
LOOP=$(vs losetup -f --show --sector-size 512 vol)
on_exit_detach_loop "$LOOP"
[ "$(losetup -l -n -O LOG-SEC "$LOOP" | tr -d ' ')" = 512 ] || fail "--sector-size 512"
[ "$(losetup -l -n -O DIO "$LOOP" | tr -d ' ')" = 1 ] || fail "direct I/O is not the default"
mount -o ro "$LOOP" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/sums") || fail "checksums differ on the 512 loop"
umount "$T/mnt"
vs losetup -d "$LOOP"
LOOP=$(vs losetup -f --show --direct-io=off vol)
on_exit_detach_loop "$LOOP"
[ "$(losetup -l -n -O DIO "$LOOP" | tr -d ' ')" = 0 ] || fail "--direct-io=off"
vs losetup -d "$LOOP"

# Bad arguments: usage errors, nothing bound (counting only this test's devfs: other tests
# bind loop devices meanwhile).
before=$(losetup -a | grep -cF "$DEV/" || true)
expect_fail vs losetup -f --sector-size 1000 vol
expect_fail vs losetup -f --direct-io=maybe vol
expect_fail vs losetup -f nosuchdevice
# A name that climbs out of devfs is not a device, even when the file exists.
truncate -s 1M "$T/outside.img"
rel=$(realpath --relative-to="$DEV" "$T/outside.img")
expect_fail vs losetup -f "$rel"
expect_fail vs losetup -f "$DEV/$rel"
losetup -j "$T/outside.img" | grep -q . && fail "a file outside devfs was bound"
! grep -qF outside.img "$VS_STATE/loops.json" 2>/dev/null || fail "a file outside devfs was recorded"
[ "$(losetup -a | grep -cF "$DEV/" || true)" = "$before" ] || fail "a failed losetup left a binding"
echo PASS
