#!/bin/bash
# The VG-from-a-snapshot recipe (docs/format/pool.md, "Snapshots and clones"): a VG on a pool
# volume, XFS on its LV; snapshot the volume with the filesystem frozen, clone it; the clone
# carries the live PV's and VG's UUIDs (the duplicate-PV trap), so lvm2's own vgimportclone
# gives it new PV UUIDs, a new VG UUID and name; then:
#   1. lvm2's vgs and pvs see both VGs side by side with different UUIDs;
#   2. volstack sees both, activates the past VG's LV beside the live one, and XFS mounts from
#      it read-only showing the snapshot's files while the live LV shows the later ones.
# lvm2 runs without device-mapper (activation off, a private LVM_SYSTEM_DIR: lib.sh).
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount fsfreeze sha256sum lvm vgimportclone
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"
setup_lvm2_env

truncate -s 1G "$T/rp.img"
vs zpool create rp "$T/rp.img"
vs zfs create -s -b 4K -V 400M rp/pv
vs pvcreate rp/pv >/dev/null
vs vgcreate vg0 rp/pv >/dev/null
vs lvcreate -L 320M -n lv0 vg0 >/dev/null
on_exit_stop_daemon
vs up
on_exit "umount -l $VS_STATE/dev"
mkdir -p "$T/live" "$T/past"

bind() { # name -> $LOOP
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "$1")
  on_exit_detach_loop "$LOOP"
}

# The live filesystem, a snapshot of the frozen state, later changes.
bind vg0/lv0
LIVE=$LOOP
mkfs.xfs -q "$LIVE"
mount "$LIVE" "$T/live"
on_exit_umount "$T/live"
for i in 1 2 3; do head -c $((i * 300 * 1024)) /dev/urandom >"$T/live/f$i"; done
(cd "$T/live" && sha256sum f*) >"$T/manifest1"
sync
fsfreeze -f "$T/live"
timeout 20 "$VOLSTACK" zfs snapshot rp/pv@past || { fsfreeze -u "$T/live"; fail "snapshot"; }
fsfreeze -u "$T/live"
rm "$T/live/f1"
head -c $((512 * 1024)) /dev/urandom >"$T/live/later"
sync
(cd "$T/live" && sha256sum f* later) >"$T/manifest2"
timeout 20 "$VOLSTACK" zfs clone rp/pv@past rp/pastpv

# lvm2 on loop devices over both volumes: the clone is a duplicate until vgimportclone.
bind rp/pv
PV=$LOOP
bind rp/pastpv
CLONE=$LOOP
lvm2_config_for "$PV" "$CLONE"
timeout 30 vgimportclone --basevgname vgpast "${LC[@]}" "$CLONE" >"$T/vic.out" 2>&1 ||
  fail "vgimportclone: $(cat "$T/vic.out")"
timeout 30 lvm vgs "${LC[@]}" --noheadings -o vg_name,vg_uuid 2>/dev/null | sort >"$T/vgs"
[ "$(awk '{print $1}' "$T/vgs" | tr '\n' ' ')" = "vg0 vgpast " ] || fail "lvm2 vgs: $(cat "$T/vgs")"
[ "$(awk '{print $2}' "$T/vgs" | sort -u | wc -l)" = 2 ] || fail "VG UUIDs not distinct: $(cat "$T/vgs")"
timeout 30 lvm pvs "${LC[@]}" --noheadings -o pv_name,pv_uuid,vg_name 2>/dev/null >"$T/pvs"
[ "$(awk '{print $2}' "$T/pvs" | sort -u | wc -l)" = 2 ] || fail "PV UUIDs not distinct: $(cat "$T/pvs")"
grep -q "$CLONE .* vgpast" "$T/pvs" || fail "lvm2 pvs: $(cat "$T/pvs")"
timeout 30 lvm lvs "${LC[@]}" --noheadings -o lv_name,vg_name vgpast 2>/dev/null | grep -q "lv0 *vgpast" ||
  fail "lvm2 lvs does not list vgpast/lv0"
timeout 20 "$VOLSTACK" losetup -d "$CLONE"
timeout 20 "$VOLSTACK" losetup -d "$PV"

# volstack: both VGs; the past one's LV mounts beside the live one.
vs vgs --noheadings -o vg_name | tr -d ' ' | sort | tr '\n' ' ' >"$T/vsvgs"
[ "$(cat "$T/vsvgs")" = "vg0 vgpast " ] || fail "volstack vgs: $(cat "$T/vsvgs")"
timeout 20 "$VOLSTACK" vgchange -ay vgpast >/dev/null
for _ in $(seq 50); do [ -e "$VS_STATE/dev/vgpast/lv0" ] && break; sleep 0.1; done
bind vgpast/lv0
mount -o ro,norecovery,nouuid "$LOOP" "$T/past"
on_exit_umount "$T/past"
(cd "$T/past" && sha256sum -c --quiet "$T/manifest1") || fail "manifest 1 on vgpast/lv0"
[ ! -e "$T/past/later" ] || fail "the past shows a later file"
(cd "$T/live" && sha256sum -c --quiet "$T/manifest2") || fail "manifest 2 on vg0/lv0"
umount "$T/past"
umount "$T/live"
echo PASS
