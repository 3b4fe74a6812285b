#!/bin/bash
# A raid1 LV served by volstack with XFS on it, one leg's backing file then removed.
#   1. The VG is written the way lvm2 writes `lvcreate --type raid1 -m1 --nosync` (lvm2 cannot
#      create raid LVs without device-mapper): the text is applied with lvm2's vgcfgrestore
#      and accepted by its vgck and lvs.
#   2. volstack activates r1 from the two PV files (no loop devices under volstack), mkfs.xfs
#      and files through a loop device; both legs hold the same bytes, and each rmeta holds a
#      dm-raid superblock ("DmRd") afterwards. lvm2 still accepts the VG.
#   3. leg 1's PV file is removed: `volstack up` serves r1 degraded (lv_attr health 'p'), XFS
#      mounts and every file reads back; a write while degraded lands on leg 0 and leg 0's
#      superblock records leg 1 as failed.
#   4. A sub-LV is still refused, in one line.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd lvm losetup mkfs.xfs mount umount sha256sum cmp dd od
[ -c /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"
setup_lvm2_env

A=$T/a.img B=$T/b.img
truncate -s 400M "$A" "$B"
uuid() {
  local s
  s=$(printf '%s' "$1" | sha256sum | head -c 32)
  echo "${s:0:6}-${s:6:4}-${s:10:4}-${s:14:4}-${s:18:4}-${s:22:4}-${s:26:6}"
}
sub() {  # sub NAME PV PE EXTENTS
  cat <<EOF
$1 {
id = "$(uuid "lv-$1")"
status = ["READ", "WRITE"]
flags = []
creation_time = 1796661679
creation_host = "vm"
segment_count = 1

segment1 {
start_extent = 0
extent_count = $4

type = "striped"
stripe_count = 1

stripes = [
"$2", $3
]
}
}
EOF
}
gen_vg() {
  cat <<EOF
contents = "Text Format Volume Group"
version = 1
description = "volstack raid1 test"
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
dev_size = 819200
pe_start = 2048
pe_count = 99
}
pv1 {
id = "$(uuid pv1)"
device = "$2"
status = ["ALLOCATABLE"]
flags = []
dev_size = 819200
pe_start = 2048
pe_count = 99
}
}
logical_volumes {
r1 {
id = "$(uuid lv-r1)"
status = ["READ", "WRITE", "VISIBLE", "NOTSYNCED"]
flags = []
creation_time = 1796661679
creation_host = "vm"
segment_count = 1

segment1 {
start_extent = 0
extent_count = 80

type = "raid1"
device_count = 2
region_size = 4096

raids = [
"r1_rmeta_0", "r1_rimage_0",
"r1_rmeta_1", "r1_rimage_1"
]
}
}
$(sub r1_rmeta_0 pv0 0 1)
$(sub r1_rmeta_1 pv1 0 1)
$(sub r1_rimage_0 pv0 1 80)
$(sub r1_rimage_1 pv1 1 80)
}
}
EOF
}

lvm2_attach() {  # loop devices for lvm2 only: sets LA LB and LC
  LA=$(losetup -f --show "$A"); on_exit_detach_loop "$LA"
  LB=$(losetup -f --show "$B"); on_exit_detach_loop "$LB"
  lvm2_config_for "$LA" "$LB"
}
lvm2_detach() { losetup -d "$LA"; losetup -d "$LB"; }

echo "== 1. lvm2 writes and accepts the VG"
lvm2_attach
lvm pvcreate "${LC[@]}" -q -ff -y -u "$(uuid pv0)" --norestorefile "$LA" >/dev/null 2>&1
lvm pvcreate "${LC[@]}" -q -ff -y -u "$(uuid pv1)" --norestorefile "$LB" >/dev/null 2>&1
gen_vg "$LA" "$LB" >"$T/vgx.txt"
lvm vgcfgrestore "${LC[@]}" -f "$T/vgx.txt" vgx >"$T/restore.out" 2>&1 ||
  fail "vgcfgrestore: $(cat "$T/restore.out")"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck"
lvm lvs "${LC[@]}" -a --noheadings -o lv_name,segtype vgx >"$T/lvs2" 2>/dev/null
grep -q "r1 *raid1" "$T/lvs2" ||
  fail "lvm2 does not list r1 as raid1: $(cat "$T/lvs2")"
rmeta_pe() {  # byte offset of a sub-LV's first extent on its PV, from lvm2's report
  local pe
  pe=$(lvm lvs "${LC[@]}" -a --noheadings -o lv_name,devices vgx 2>/dev/null |
    sed -nE "s/^ *\\[$1\\] +[^ ]+\\(([0-9]+)\\).*/\\1/p")
  [ -n "$pe" ] || fail "lvm2 does not report where $1 is"
  echo $((1048576 + pe * 4194304))
}
META0=$(rmeta_pe r1_rmeta_0) META1=$(rmeta_pe r1_rmeta_1) IMG0=$(rmeta_pe r1_rimage_0) IMG1=$(rmeta_pe r1_rimage_1)
lvm2_detach

echo "== 2. volstack serves r1: XFS through a loop device"
vs pvscan "$A" "$B" >/dev/null
vs lvs -a vgx >"$T/lvs.out"
grep -q "r1_rimage_1" "$T/lvs.out" || fail "volstack lvs -a: $(cat "$T/lvs.out")"
timeout 20 "$VOLSTACK" vgchange -a y vgx >/dev/null || fail "vgchange -a y"
on_exit_stop_daemon
timeout 30 "$VOLSTACK" up || fail "up"
on_exit "umount -l $VS_STATE/dev"
[ -f "$VS_STATE/dev/vgx/r1" ] || fail "vgx/r1 not in devfs: $(ls -R "$VS_STATE/dev")"
vs lvs --noheadings -o lv_attr,copy_percent vgx/r1 | grep -q "rwi-a-r--- *100.00" ||
  fail "r1 attr: $(vs lvs -o lv_attr,copy_percent vgx/r1)"
loop=$(timeout 20 "$VOLSTACK" losetup -f --show vgx/r1)
on_exit_detach_loop "$loop"
mkfs.xfs -q "$loop" || fail "mkfs.xfs on r1"
mkdir "$T/mnt"
mount "$loop" "$T/mnt"
on_exit_umount "$T/mnt"
for i in 1 2 3 4; do head -c $((i * 1234567)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f1 f2 f3 f4) >"$T/sums"
umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$loop"
timeout 30 "$VOLSTACK" down || fail "down"
# Both legs hold the same bytes; each rmeta a dm-raid superblock for its position.
cmp <(dd if="$A" bs=1M skip=$((IMG0 / 1048576)) count=320 status=none) \
  <(dd if="$B" bs=1M skip=$((IMG1 / 1048576)) count=320 status=none) || fail "the legs differ"
[ "$(dd if="$A" bs=1 skip="$META0" count=4 status=none)" = DmRd ] || fail "no superblock on leg 0"
[ "$(dd if="$B" bs=1 skip="$META1" count=4 status=none)" = DmRd ] || fail "no superblock on leg 1"
[ "$(od -An -tu4 -j $((META1 + 12)) -N4 "$B" | tr -d ' ')" = 1 ] || fail "leg 1's array_position"
lvm2_attach
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck after volstack served r1"
lvm lvs "${LC[@]}" -a vgx >/dev/null 2>&1 || fail "lvm2 lvs after volstack served r1"
lvm2_detach

echo "== 3. leg 1's backing file removed: served degraded"
rm -f "$B"
timeout 30 "$VOLSTACK" up || fail "up without leg 1: $(cat "$VS_STATE"/*.log 2>/dev/null | tail -5)"
[ -f "$VS_STATE/dev/vgx/r1" ] || fail "vgx/r1 not served degraded"
vs lvs --noheadings -o lv_attr vgx/r1 2>/dev/null | grep -q "rwi-a-r-p-" ||
  fail "r1 attr when degraded: $(vs lvs -o lv_attr vgx/r1 2>&1)"
loop=$(timeout 20 "$VOLSTACK" losetup -f --show vgx/r1)
on_exit_detach_loop "$loop"
mount "$loop" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/sums") || fail "files differ when degraded"
head -c 3000000 /dev/urandom >"$T/mnt/f5"
(cd "$T/mnt" && sha256sum f5) >>"$T/sums"
umount "$T/mnt"
mount -o ro "$loop" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/sums") || fail "files differ after a degraded write"
umount "$T/mnt"
timeout 20 "$VOLSTACK" losetup -d "$loop"
# Leg 0's superblock records leg 1 as failed (failed_devices bit 1).
[ "$(od -An -tu8 -j $((META0 + 24)) -N8 "$A" | tr -d ' ')" = 2 ] || fail "leg 1 not recorded as failed"

echo "== 4. sub-LVs stay refused"
if vs lvm-cat vgx/r1_rimage_0 --length 4096 >/dev/null 2>"$T/cat.err"; then fail "r1_rimage_0 activated"; fi
[ "$(wc -l <"$T/cat.err")" = 1 ] && grep -q "r1_rimage_0 is part of LV vgx/r1 (segment type raid1)" "$T/cat.err" ||
  fail "refusal: $(cat "$T/cat.err")"
timeout 30 "$VOLSTACK" down || fail "down"
echo PASS
