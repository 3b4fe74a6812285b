#!/bin/bash
# Space saved by pool compression on a file-system image of a Debian tree, next to what the
# command-line codecs make of the same image (issue 35, "Space"):
#   1. an XFS image (sparse file, SIZE, default 2G) holding a copy of SRC (default
#      /usr/share);
#   2. `lz4 -1` and `zstd -3` of the image file;
#   3. the image written (dd, 1 MiB direct writes; zero blocks become holes) through a loop
#      device into pool volumes with compression=off, lz4 and zstd, each in its own pool;
#      their `used`, `logicalused` and `compressratio` once committed.
# Prints one table: bytes stored and the ratio to the image's allocated bytes (du).
# Usage: bench/compress_space.sh [--src DIR] [--size 2G] [--dir DIR]
# Env: VOLSTACK (the binary). Needs root, loop devices, FUSE, mkfs.xfs, lz4, zstd.
set -euo pipefail

SRC=/usr/share SIZE=2G DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --src) SRC=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    *) echo "usage: $0 [--src DIR] [--size 2G] [--dir DIR]" >&2; exit 2 ;;
  esac
done
VOLSTACK=${VOLSTACK:-volstack}
for c in mkfs.xfs lz4 zstd losetup mount; do
  command -v "$c" >/dev/null || { echo "needs $c" >&2; exit 1; }
done
T=$(mktemp -d "${DIR:-/var/tmp}/volstack-compress-space.XXXXXX")
export VOLSTACK_STATE_DIR=$T/state
mkdir -p "$T/state" "$T/mnt"
LOOP=""
cleanup() {
  set +e
  mountpoint -q "$T/mnt" && umount "$T/mnt"
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
  timeout 30 "$VOLSTACK" down --force >/dev/null 2>&1
  umount -l "$T/state/dev" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

# 1. The image.
truncate -s "$SIZE" "$T/image"
mkfs.xfs -q "$T/image"
LOOP=$(losetup -f --show "$T/image")
mount "$LOOP" "$T/mnt"
cp -a "$SRC/." "$T/mnt/" 2>/dev/null || true  # a file that vanished meanwhile is no matter
umount "$T/mnt"
losetup -d "$LOOP"
LOOP=""
allocated=$(($(du -k "$T/image" | cut -f1) * 1024))

# 2. The command-line codecs.
lz4 -q -1 -c "$T/image" >"$T/image.lz4"
zstd -q -3 -T1 -c "$T/image" >"$T/image.zst"

# 3. Pool volumes.
volsize=$(stat -c %s "$T/image")
declare -A used lused ratio
for comp in off lz4 zstd; do
  truncate -s $((2 * volsize + (512 << 20))) "$T/vdev-$comp"
  "$VOLSTACK" zpool create "sp$comp" "$T/vdev-$comp"
  "$VOLSTACK" zfs create -s -V "$volsize" -o compression="$comp" -o logbias=throughput "sp$comp/v"
done
timeout 30 "$VOLSTACK" up
for comp in off lz4 zstd; do
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "sp$comp/v")
  dd if="$T/image" of="$LOOP" bs=1M oflag=direct status=none
  timeout 20 "$VOLSTACK" losetup -d "$LOOP"
  LOOP=""
done
timeout 60 "$VOLSTACK" down
for comp in off lz4 zstd; do
  read -r u l r <<<"$("$VOLSTACK" zfs get -H -p -o value used,logicalused,compressratio "sp$comp/v" | tr '\n' ' ')"
  used[$comp]=$u lused[$comp]=$l ratio[$comp]=$r
done

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
rel() { awk -v a="$allocated" -v b="$1" 'BEGIN { printf "%.2f", a / b }'; }
echo "source: $SRC ($(du -sh "$SRC" 2>/dev/null | cut -f1)), image $SIZE, load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-22s %12s %14s\n' "what" "MiB stored" "image/stored"
printf '%-22s %12s %14s\n' "image (du)" "$(mib "$allocated")" "1.00"
for f in lz4 zst; do
  s=$(stat -c %s "$T/image.$f")
  printf '%-22s %12s %14s\n' "$([ $f = lz4 ] && echo 'lz4 -1' || echo 'zstd -3') of the image" "$(mib "$s")" "$(rel "$s")"
done
for comp in off lz4 zstd; do
  printf '%-22s %12s %14s   (logicalused %s MiB, compressratio %sx)\n' "pool compression=$comp" \
    "$(mib "${used[$comp]}")" "$(rel "${used[$comp]}")" "$(mib "${lused[$comp]}")" "${ratio[$comp]}"
done
