#!/bin/bash
# Compression of pool volumes, end to end, through the daemon, a loop device and XFS:
#   1. bad values of `compression` are refused (zfs's exit code 1 for set, 2 is not used)
#      and change nothing; zfs get shows the value set;
#   2. a known mix on XFS over an lz4 volume: 8 MiB of zeroes (holes), 16 MiB of text
#      (lz4 stores each 16 KiB block in 8 KiB: about 2x at ashift 12), 16 MiB of random
#      bytes (stored whole). Prediction: logical ~32 MiB + metadata over physical ~24 MiB
#      + metadata: compressratio 1.20x-1.50x (measured 1.38x); logicalused > used;
#   3. export and import the pool: every file reads back identical;
#   4. one compressed block damaged on disk (a marker that lz4 keeps literally in its
#      stream is found in the image and flipped): reading that file is EIO, never other
#      bytes; the other files still read back.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount sha256sum python3
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

truncate -s 1G "$T/cmp.img"
vs zpool create cmp "$T/cmp.img"
# No intent log: its records would leave a raw copy of the data in the image (step 4).
vs zfs create -s -V 320M -o compression=lz4 -o logbias=throughput cmp/vol

# 1. Bad values: refused, nothing changed.
for bad in gzip zstd-20 zstd-0 LZ4; do
  expect_fail vs zfs set compression=$bad cmp/vol
done
expect_fail vs zfs create -s -V 16M -o compression=lzjb cmp/other
vs zfs list -H -o name cmp/other >/dev/null 2>&1 && fail "a volume with a bad compression was created"
[ "$(vs zfs get -H -o value compression cmp/vol)" = lz4 ] || fail "compression: $(vs zfs get compression cmp/vol)"

on_exit_stop_daemon
timeout 20 "$VOLSTACK" up
on_exit "umount -l $VS_STATE/dev"
mkdir -p "$T/mnt"
bind() {
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show cmp/vol)
  on_exit_detach_loop "$LOOP"
}

# 2. The mix.
bind
mkfs.xfs -q "$LOOP"
mount "$LOOP" "$T/mnt"
on_exit_umount "$T/mnt"
head -c $((8 << 20)) /dev/zero >"$T/mnt/zeros"
python3 - "$T/mnt/text" <<'PY'
import random, sys
rng = random.Random(7)
words = [b"volume ", b"pool ", b"block ", b"pointer ", b"checksum ", b"txg ", b"zfs ",
         b"lz4 ", b"zstd ", b"\n"]
# A marker lz4 keeps as literals at the head of the file's first block (step 4).
out = [b"VOLSTACK-MARKER-7f3a9c2e51d84b06-" * 4]
n = len(out[0])
while n < 16 << 20:
    w = words[rng.randrange(len(words))]
    out.append(w)
    n += len(w)
open(sys.argv[1], "wb").write(b"".join(out)[: 16 << 20])
PY
head -c $((16 << 20)) /dev/urandom >"$T/mnt/random"
(cd "$T/mnt" && sha256sum zeros text random) >"$T/sums"
cp "$T/mnt/text" "$T/text.orig"
umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$LOOP"
timeout 30 "$VOLSTACK" down

read -r used lused ratio <<<"$(vs zfs get -H -p -o value used,logicalused,compressratio cmp/vol | tr '\n' ' ')"
echo "used $used logicalused $lused compressratio $ratio"
[ "$lused" -gt "$used" ] || fail "logicalused $lused not above used $used"
python3 -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 1.20 <= r <= 1.50 else 1)" "$ratio" ||
  fail "compressratio $ratio outside the predicted 1.20-1.50"
vs zfs get -H -o value compressratio cmp/vol | grep -qx "${ratio}x" || fail "compressratio without -p"
vs zfs list -H -o name,compressratio,logicalused cmp/vol | grep -q "^cmp/vol	${ratio}x	" ||
  fail "zfs list -o: $(vs zfs list -H -o name,compressratio,logicalused cmp/vol)"

# 3. Export, import, read back.
vs zpool export cmp
vs zpool import -d "$T" cmp
timeout 20 "$VOLSTACK" up
bind
mount -o ro "$LOOP" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/sums") || fail "files differ after export/import"
umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$LOOP"
timeout 30 "$VOLSTACK" down
vs zpool export cmp

# 4. Damage the compressed block holding the marker.
python3 - "$T/cmp.img" <<'PY' || fail "no compressed copy of the marker found"
import mmap, sys
marker = b"VOLSTACK-MARKER-7f3a9c2e51d84b06-"
with open(sys.argv[1], "r+b") as f:
    m = mmap.mmap(f.fileno(), 0)
    hits, pos = [], m.find(marker)
    while pos >= 0:
        hits.append(pos)
        pos = m.find(marker, pos + 1)
    assert hits, "marker not in the image"
    # Stored compressed: lz4 keeps the marker once, not the four copies the file holds.
    assert m.find(marker * 4) < 0, "the block is stored uncompressed"
    for h in hits:
        m[h + 5] ^= 0x40
    m.flush()
PY
vs zpool import -d "$T" cmp
timeout 20 "$VOLSTACK" up
bind
mount -o ro,norecovery "$LOOP" "$T/mnt"
if timeout 20 cat "$T/mnt/text" >"$T/text.out" 2>"$T/cat.err"; then
  fail "a damaged compressed block was read without an error"
fi
grep -qi "input/output error" "$T/cat.err" || fail "not EIO: $(cat "$T/cat.err")"
# Whatever was handed out before the error is the file's own bytes.
cmp -s -n "$(stat -c %s "$T/text.out")" "$T/text.out" "$T/text.orig" || fail "wrong bytes before the error"
(cd "$T/mnt" && sha256sum -c --quiet <(grep -v ' text$' "$T/sums")) || fail "undamaged files differ"
umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$LOOP"
echo PASS
