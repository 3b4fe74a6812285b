#!/bin/bash
# LVM2 interoperability, both ways, against the real lvm2 tools (metadata only: no
# device-mapper here, so lvm2 runs with activation=0 and lvcreate -an -Zn).
#   1. lvm2 -> volstack: two VGs made by lvm2 (1 MiB and 4 MiB extents, linear, striped and
#      lvextend'ed multi-segment LVs, a PV with two metadata areas). volstack's pvs/vgs/lvs
#      report the same names, UUIDs, sizes and extent maps; data written with dd at the PV
#      offsets lvm2 reports reads back through volstack's own LV mapping.
#   2. volstack -> lvm2: a VG made by volstack passes lvm2's pvs/vgs/lvs/vgck and blkid, with
#      the same layout; lvm2 then extends it and volstack still reads it.
#   3. Bad input: a corrupted label and a corrupted metadata checksum give clear errors and
#      nothing is written.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd lvm losetup blkid dd cmp
[ -e /dev/loop-control ] || skip "needs loop devices"
setup_lvm2_env

new_loop a 64M; A=$LOOP
new_loop b 64M; B=$LOOP
new_loop c 96M; C=$LOOP
new_loop d 64M; D=$LOOP
new_loop e 64M; E=$LOOP
new_loop f 64M; F=$LOOP
lvm2_config_for $A $B $C $D $E $F

# Reports compared between lvm2 and volstack: separators, bytes, no headings.
RPT=(--noheadings --separator : --units b --nosuffix)
LV_FIELDS=vg_name,lv_name,lv_uuid,lv_size,seg_start_pe,seg_size_pe,segtype,stripes,stripe_size,seg_pe_ranges,devices
PV_FIELDS=pv_name,pv_uuid,vg_name,pe_start,pv_pe_count,pv_pe_alloc_count,pv_size,pv_free
VG_FIELDS=vg_name,vg_uuid,vg_seqno,vg_extent_size,vg_extent_count,vg_free_count,pv_count,lv_count

compare() {  # compare WHAT: lvm2's and volstack's reports must be identical
  local what=$1 fields=$2
  lvm "$what" "${LC[@]}" "${RPT[@]}" -o "$fields" 2>/dev/null | sort >"$T/lvm2.$what"
  vs "$what" "${RPT[@]}" -o "$fields" | sort >"$T/vs.$what"
  if ! diff -u "$T/lvm2.$what" "$T/vs.$what"; then fail "$what differs between lvm2 and volstack"; fi
  [ -s "$T/vs.$what" ] || fail "$what: empty report"
}

echo "== 1. lvm2 -> volstack"
lvm pvcreate "${LC[@]}" -q "$A" "$B" >/dev/null
lvm pvcreate "${LC[@]}" -q --pvmetadatacopies 2 "$C" >/dev/null
lvm vgcreate "${LC[@]}" -q -s 1m vga "$A" "$B" >/dev/null
lvm vgcreate "${LC[@]}" -q vgb "$C" >/dev/null
lvm lvcreate "${LC[@]}" -q -an -Zn -L 5m -n lin vga >/dev/null 2>&1
lvm lvcreate "${LC[@]}" -q -an -Zn -l 8 -i 2 -I 32k -n str vga >/dev/null 2>&1
lvm lvextend "${LC[@]}" -q -l +5 vga/lin >/dev/null 2>&1
lvm lvextend "${LC[@]}" -q -l +4 vga/str >/dev/null 2>&1
lvm lvcreate "${LC[@]}" -q -an -Zn -L 12m -n big vgb >/dev/null 2>&1
lvm lvcreate "${LC[@]}" -q -an -Zn -L 8m -n other vgb >/dev/null 2>&1
lvm lvextend "${LC[@]}" -q -L +8m vgb/big >/dev/null 2>&1

vs pvscan "$A" "$B" "$C" >/dev/null
compare pvs "$PV_FIELDS"
compare vgs "$VG_FIELDS"
compare lvs "$LV_FIELDS"
[ "$(vs lvs --noheadings -o seg_count vga/lin | tr -d ' ')" = 2 ] || fail "vga/lin should have 2 segments"

# Data: for every segment area lvm2 reports, write a distinct 4 KiB block with dd at the PV
# offset of its first PE, and read it back through volstack's LV at the LE it maps.
check_data() {  # check_data VG LV
  local vg=$1 lv=$2 ext pe_start
  ext=$(lvm vgs "${LC[@]}" "${RPT[@]}" -o vg_extent_size "$vg" 2>/dev/null | tr -d ' ')
  lvm lvs "${LC[@]}" --noheadings --separator '|' -o seg_start_pe,stripes,stripe_size,devices --units b --nosuffix "$vg/$lv" 2>/dev/null |
    while IFS='|' read -r start stripes ssize devices; do
      start=$(echo "$start" | tr -d ' '); stripes=$(echo "$stripes" | tr -d ' '); ssize=$(echo "$ssize" | tr -d ' ')
      local i=0
      for area in ${devices//,/ }; do
        local dev=${area%%(*} pe=${area##*(}
        pe=${pe%)}
        pe_start=$(lvm pvs "${LC[@]}" "${RPT[@]}" -o pe_start "$dev" 2>/dev/null | tr -d ' ')
        head -c 4096 /dev/urandom >"$T/blk"
        dd if="$T/blk" of="$dev" bs=4096 seek=$(((pe_start + pe * ext) / 4096)) conv=notrunc,fsync status=none
        # Where that block sits in the LV: linear -> the segment start; striped -> chunk i.
        local lv_off=$((start * ext + i * (stripes > 1 ? ssize : 0)))
        vs lvm-cat "$vg/$lv" --offset "$lv_off" --length 4096 >"$T/got"
        cmp -s "$T/blk" "$T/got" || fail "$vg/$lv: data at $dev PE $pe not at LV offset $lv_off"
        i=$((i + 1))
      done
    done
}
check_data vga lin
check_data vga str
check_data vgb big
echo "data written at lvm2's PV offsets reads back through volstack's LVs"

echo "== 2. volstack -> lvm2"
vs pvcreate "$D" "$E" >/dev/null
vs vgcreate -s 2m vgv "$D" "$E" >/dev/null
vs lvcreate -an -Zn -L 10m -n l1 vgv >/dev/null
vs lvcreate -an -Zn -l 6 -i 2 -I 64k -n s1 vgv >/dev/null
vs lvextend -L +6m vgv/l1 >/dev/null
[ "$(blkid -o value -s TYPE "$D")" = LVM2_member ] || fail "blkid does not see LVM2_member on $D"
lvm vgck "${LC[@]}" vgv || fail "lvm2 vgck rejects volstack's VG"
lvm pvck "${LC[@]}" "$D" >/dev/null 2>&1 || fail "lvm2 pvck rejects volstack's PV"
compare pvs "$PV_FIELDS"
compare vgs "$VG_FIELDS"
compare lvs "$LV_FIELDS"
lvm lvs "${LC[@]}" -o +seg_pe_ranges vgv >/dev/null 2>&1 || fail "lvm2 lvs fails on volstack's VG"
# lvm2 extends volstack's VG; volstack reads lvm2's newer metadata.
lvm lvextend "${LC[@]}" -q -l +3 vgv/l1 >/dev/null 2>&1 || fail "lvm2 cannot extend volstack's LV"
lvm lvcreate "${LC[@]}" -q -an -Zn -L 4m -n fromlvm vgv >/dev/null 2>&1 || fail "lvm2 lvcreate in volstack's VG"
compare lvs "$LV_FIELDS"
compare vgs "$VG_FIELDS"
vs vgck vgv || fail "volstack vgck after lvm2's write"

echo "== 3. bad input"
vs pvcreate "$F" >/dev/null
vs vgcreate vgbad "$F" >/dev/null
cp "$T/f.img" "$T/f.before"
# Flip a byte inside the committed metadata text: the checksum no longer matches.
off=$(od -An -t u8 -j $((4096 + 40)) -N 8 "$T/f.img" | tr -d ' ')
printf 'X' | dd of="$F" bs=1 seek=$((4096 + off + 10)) conv=notrunc,fsync status=none
cp "$T/f.img" "$T/f.corrupt"
out=$(vs vgck vgbad 2>&1) && fail "vgck accepted a bad metadata checksum"
echo "$out" | grep -q "checksum" || fail "vgck did not name the checksum: $out"
expect_fail vs lvcreate -L 4m -n x vgbad
cmp -s "$T/f.img" "$T/f.corrupt" || fail "a failed command wrote to the device"
# A corrupted label: the device is not used, and the error names the label checksum.
printf 'Y' | dd of="$F" bs=1 seek=$((512 + 100)) conv=notrunc,fsync status=none
out=$(vs pvs "$F" 2>&1) && fail "pvs accepted a corrupted label"
echo "$out" | grep -q "checksum" || fail "no checksum error for a bad label: $out"
echo "PASS"
