#!/bin/bash
# A thin LV served by volstack from a thin pool lvm2 and thin-provisioning-tools wrote, with
# XFS on it.
#   1. An XFS image (files of random bytes) is cut into the pool's 64 KiB blocks: the
#      non-zero ones are packed into the pool's data LV, and their mapping is written to its
#      metadata LV with thin_restore from XML (thin_check passes). The VG is the one
#      `lvcreate --type thin-pool` and `lvcreate -V` would write (lvm2 cannot without
#      device-mapper), applied with vgcfgrestore and accepted by vgck and lvs.
#   2. volstack lists the thin LV as lvm2 does, reads back the whole image through its
#      mapping (unmapped blocks as zeroes), and serves it: XFS mounts read-only through a loop
#      device and every file reads back; lvs shows it active with lvm2's Data%.
#   3. XFS mounted read-write with -o discard: files written and removed; afterwards
#      thin_check passes on the metadata volstack committed, thin_dump shows the new
#      mappings, and after a restart every file reads back.
#   4. The pool and its sub-LVs stay refused; a pool whose transaction_id the VG contradicts
#      is refused with one line, writing nothing.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd lvm losetup mkfs.xfs mount umount sha256sum cmp dd thin_restore thin_check thin_dump python3
[ -c /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"
setup_lvm2_env

CHUNK=65536 EXT=4194304 THIN_EXTENTS=80  # a 320 MiB thin LV (XFS's smallest)
IMG=$T/xfs.img
truncate -s $((THIN_EXTENTS * EXT)) "$IMG"
# 4 KiB sectors: the loop device over a volstack devfs file has them.
mkfs.xfs -q -s size=4096 "$IMG" || fail "mkfs.xfs"
mkdir "$T/mnt"
iloop=$(losetup -f --show "$IMG"); on_exit_detach_loop "$iloop"
mount "$iloop" "$T/mnt"; on_exit_umount "$T/mnt"
for i in 1 2 3; do head -c $((i * 1000000 + 4321)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f1 f2 f3) >"$T/sums"
umount "$T/mnt"; losetup -d "$iloop"

# The non-zero chunks, packed in order (data block k holds the k-th), and the XML mapping.
python3 - "$IMG" "$T/packed" "$T/thin.xml" "$CHUNK" <<'PY'
import sys
img, packed, xml, chunk = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
zero = bytes(chunk)
maps = []
with open(img, 'rb') as f, open(packed, 'wb') as out:
    v = 0
    while True:
        b = f.read(chunk)
        if not b:
            break
        if b != zero:
            maps.append((v, len(maps)))
            out.write(b)
        v += 1
nr_data = len(maps) + 64
with open(xml, 'w') as x:
    x.write('<superblock uuid="" time="1" transaction="1" flags="0" version="2" '
            'data_block_size="%d" nr_data_blocks="%d">\n' % (chunk // 512, nr_data))
    x.write('  <device dev_id="1" mapped_blocks="%d" transaction="0" creation_time="0" '
            'snap_time="0">\n' % len(maps))
    for v, d in maps:
        x.write('    <single_mapping origin_block="%d" data_block="%d" time="0"/>\n' % (v, d))
    x.write('  </device>\n</superblock>\n')
PY
NR_DATA=$(grep -o 'nr_data_blocks="[0-9]*"' "$T/thin.xml" | tr -dc 0-9)
TDATA_EXTENTS=$(((NR_DATA * CHUNK + EXT - 1) / EXT))
# The pool's data LV is exactly nr_data_blocks long, as lvm2 sizes it.
NR_DATA=$((TDATA_EXTENTS * EXT / CHUNK))
sed -i "s/nr_data_blocks=\"[0-9]*\"/nr_data_blocks=\"$NR_DATA\"/" "$T/thin.xml"
PE_COUNT=$((TDATA_EXTENTS + 2))
A=$T/a.img
truncate -s $(((PE_COUNT + 1) * EXT)) "$A"

uuid() {
  local s
  s=$(printf '%s' "$1" | sha256sum | head -c 32)
  echo "${s:0:6}-${s:6:4}-${s:10:4}-${s:14:4}-${s:18:4}-${s:22:4}-${s:26:6}"
}
lv() {  # lv NAME STATUS SEGMENT-BODY EXTENTS
  printf '%s {\nid = "%s"\nstatus = [%s]\nflags = []\ncreation_time = 1796661679\n' "$1" "$(uuid "lv-$1")" "$2"
  printf 'creation_host = "vm"\nsegment_count = 1\n\nsegment1 {\nstart_extent = 0\nextent_count = %s\n\n%s\n}\n}\n' "$4" "$3"
}
linear() { printf 'type = "striped"\nstripe_count = 1\n\nstripes = [\n"pv0", %s\n]' "$1"; }
gen_vg() {  # gen_vg DEVICE POOL_TRANSACTION_ID
  cat <<EOF
contents = "Text Format Volume Group"
version = 1
description = "volstack thin test"
creation_host = "vm"
creation_time = 1796661680

vgx {
id = "$(uuid vg)"
seqno = 1
format = "lvm2"
status = ["RESIZEABLE", "READ", "WRITE"]
flags = []
extent_size = 8192
max_lv = 0
max_pv = 0
metadata_copies = 0
physical_volumes {
pv0 {
id = "$(uuid pv0)"
device = "$1"
status = ["ALLOCATABLE"]
flags = []
dev_size = $(((PE_COUNT + 1) * 8192))
pe_start = 2048
pe_count = $PE_COUNT
}
}
logical_volumes {
$(lv pool '"READ", "WRITE", "VISIBLE"' "type = \"thin-pool\"
metadata = \"pool_tmeta\"
pool = \"pool_tdata\"
transaction_id = $2
chunk_size = 128
discards = \"passdown\"
zero_new_blocks = 1" "$TDATA_EXTENTS")
$(lv t1 '"READ", "WRITE", "VISIBLE"' 'type = "thin"
thin_pool = "pool"
transaction_id = 0
device_id = 1' "$THIN_EXTENTS")
$(lv lvol0_pmspare '"READ", "WRITE"' "$(linear 0)" 1)
$(lv pool_tmeta '"READ", "WRITE"' "$(linear 1)" 1)
$(lv pool_tdata '"READ", "WRITE"' "$(linear 2)" "$TDATA_EXTENTS")
}
}
EOF
}

echo "== 1. lvm2 and thin-provisioning-tools write the pool"
LA=$(losetup -f --show "$A"); on_exit_detach_loop "$LA"
lvm2_config_for "$LA"
lvm pvcreate "${LC[@]}" -q -ff -y -u "$(uuid pv0)" --norestorefile "$LA" >/dev/null 2>&1
gen_vg "$LA" 1 >"$T/vgx.txt"
lvm vgcfgrestore "${LC[@]}" --force -f "$T/vgx.txt" vgx >"$T/restore.out" 2>&1 ||
  fail "vgcfgrestore: $(cat "$T/restore.out")"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck"
lvm lvs "${LC[@]}" -a --noheadings -o lv_name,segtype,pool_lv vgx >"$T/lvs2" 2>/dev/null
grep -Eq "^ *t1 +thin +pool" "$T/lvs2" || fail "lvm2 does not list t1 as thin: $(cat "$T/lvs2")"
pe_of() {
  local pe
  pe=$(lvm lvs "${LC[@]}" -a --noheadings -o lv_name,devices vgx 2>/dev/null |
    sed -nE "s/^ *\\[$1\\] +[^ ]+\\(([0-9]+)\\).*/\\1/p")
  [ -n "$pe" ] || fail "lvm2 does not report where $1 is"
  echo $((1048576 + pe * EXT))
}
TMETA=$(pe_of pool_tmeta) TDATA=$(pe_of pool_tdata)
losetup -d "$LA"
truncate -s $EXT "$T/meta"
thin_restore -q -i "$T/thin.xml" -o "$T/meta" || fail "thin_restore"
thin_check -q "$T/meta" || fail "thin_check of the restored metadata"
dd if="$T/meta" of="$A" bs=1M seek=$((TMETA / 1048576)) conv=notrunc status=none
dd if="$T/packed" of="$A" bs=1M seek=$((TDATA / 1048576)) conv=notrunc status=none

echo "== 2. volstack reads the thin LV through the pool's mapping"
vs pvscan "$A" >/dev/null
vs lvs -a --noheadings -o lv_name,segtype vgx >"$T/lvs.out"
grep -Eq "^ *t1 +thin" "$T/lvs.out" || fail "volstack lvs -a: $(cat "$T/lvs.out")"
timeout 60 "$VOLSTACK" lvm-cat vgx/t1 >"$T/t1.out" || fail "lvm-cat vgx/t1"
cmp "$T/t1.out" "$IMG" || fail "the thin LV differs from the image it was made from"
rm -f "$T/t1.out"
# The pool itself is not served: vgchange activates t1 and names the pool in one line.
timeout 20 "$VOLSTACK" vgchange -a y vgx >/dev/null 2>"$T/vgchange.err" && fail "the pool activated"
grep -q "vgx/pool" "$T/vgchange.err" || fail "vgchange: $(cat "$T/vgchange.err")"
on_exit_stop_daemon
timeout 30 "$VOLSTACK" up || fail "up"
on_exit "umount -l $VS_STATE/dev"
[ -f "$VS_STATE/dev/vgx/t1" ] || fail "vgx/t1 not in devfs: $(ls -R "$VS_STATE/dev")"
# lvm2's Data% of an active thin LV: mapped blocks x 64 KiB over 320 MiB.
want=$(awk -v n="$(grep -c mapping "$T/thin.xml")" 'BEGIN { printf "%.2f", n * 65536 * 100 / (80 * 4194304) }')
vs lvs --noheadings -o lv_attr,data_percent vgx/t1 >"$T/attr"
grep -Eq "^ *Vwi-a-tz-- +$want *\$" "$T/attr" || fail "t1 attr and Data%: $(cat "$T/attr"), want $want"
loop=$(timeout 20 "$VOLSTACK" losetup -f -r --show vgx/t1) || fail "losetup -r vgx/t1"
on_exit_detach_loop "$loop"
timeout 20 mount -o ro,norecovery "$loop" "$T/mnt" || fail "mount XFS from the thin LV"
(cd "$T/mnt" && timeout 20 sha256sum -c --quiet "$T/sums") || fail "files differ on the thin LV"
timeout 30 umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$loop"

echo "== 3. volstack writes the thin LV; thin-provisioning-tools accept the result"
loop=$(timeout 20 "$VOLSTACK" losetup -f --show vgx/t1) || fail "losetup vgx/t1"
on_exit_detach_loop "$loop"
timeout 20 mount -o discard "$loop" "$T/mnt" || fail "mount XFS read-write from the thin LV"
timeout 20 head -c 5000000 /dev/urandom >"$T/mnt/f4" || fail "write f4"
timeout 20 rm "$T/mnt/f2" || fail "rm f2"
(cd "$T/mnt" && timeout 20 sha256sum f1 f3 f4) >"$T/sums" || fail "sha256sum"
timeout 30 umount "$T/mnt" || fail "umount"
timeout 20 "$VOLSTACK" losetup -d "$loop"
timeout 30 "$VOLSTACK" down || fail "down"
dd if="$A" of="$T/meta" bs=1M skip=$((TMETA / 1048576)) count=4 status=none
thin_check "$T/meta" >"$T/check.out" 2>&1 || fail "thin_check after volstack wrote: $(cat "$T/check.out")"
thin_dump "$T/meta" >"$T/dump.xml" || fail "thin_dump"
before_blocks=$(grep -c "mapping" "$T/thin.xml")
mapped=$(grep -o 'mapped_blocks="[0-9]*"' "$T/dump.xml" | tr -dc 0-9)
[ "$mapped" -gt "$before_blocks" ] || fail "thin_dump shows $mapped mapped blocks, had $before_blocks"
grep -m1 "<superblock" "$T/dump.xml" | grep -q 'transaction="1"' || fail "transaction id changed: $(head -2 "$T/dump.xml")"
timeout 30 "$VOLSTACK" up || fail "up again"
loop=$(timeout 20 "$VOLSTACK" losetup -f -r --show vgx/t1) || fail "losetup -r vgx/t1 again"
on_exit_detach_loop "$loop"
timeout 20 mount -o ro "$loop" "$T/mnt" || fail "mount after the restart"
(cd "$T/mnt" && timeout 20 sha256sum -c --quiet "$T/sums") || fail "files differ after the restart"
[ -e "$T/mnt/f2" ] && fail "f2 came back"
timeout 30 umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$loop"
timeout 30 "$VOLSTACK" down || fail "down"

echo "== 4. refusals"
if vs lvm-cat vgx/pool_tdata --length 4096 >/dev/null 2>"$T/cat.err"; then fail "pool_tdata activated"; fi
[ "$(wc -l <"$T/cat.err")" = 1 ] || fail "refusal of pool_tdata: $(cat "$T/cat.err")"
# The VG now says transaction 2 while the pool's metadata says 1 (as after a lost commit).
LA=$(losetup -f --show "$A"); on_exit_detach_loop "$LA"
lvm2_config_for "$LA"
gen_vg "$LA" 2 | sed 's/^seqno = 1/seqno = 5/' >"$T/vgx2.txt"
lvm vgcfgrestore "${LC[@]}" --force -f "$T/vgx2.txt" vgx >/dev/null 2>&1 || fail "vgcfgrestore 2"
losetup -d "$LA"
before=$(sha256sum <"$A")
vs pvscan "$A" >/dev/null
if vs lvm-cat vgx/t1 --length 4096 >/dev/null 2>"$T/cat.err"; then fail "t1 served despite a transaction_id mismatch"; fi
[ "$(wc -l <"$T/cat.err")" = 1 ] && grep -q "transaction_id is 1, while the VG expects 2" "$T/cat.err" ||
  fail "transaction_id refusal: $(cat "$T/cat.err")"
[ "$(sha256sum <"$A")" = "$before" ] || fail "a refused activation changed the PV"
dd if="$A" of="$T/meta" bs=1M skip=$((TMETA / 1048576)) count=4 status=none
thin_check -q "$T/meta" || fail "thin_check after the refusal"
echo PASS
