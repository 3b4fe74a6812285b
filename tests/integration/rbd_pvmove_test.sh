#!/usr/bin/env bash
# pvmove of a live LV between a local file PV and a Ceph RBD PV, against a throwaway cluster:
# an LV on a file PV, bound to a loop device through devfs, XFS mounted, a writer adding files
# (each fsync'ed, then added to a checksum manifest) while `volstack pvmove` moves the LV onto
# the RBD image (vgextend'ed into the VG) and back. The manifest verifies after each move,
# after dropping the page cache and after a remount; lvs shows where the LV is.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ceph_lib.sh"
need_root
need_cmd mkfs.xfs losetup mount sha256sum
[ -e /dev/fuse ] || skip "needs /dev/fuse"
start_ceph_cluster

rbd_create pv 1G
R=$(rbd_name pv)
truncate -s 1G "$T/pv.img"
vs pvcreate "$T/pv.img" >/dev/null
vs vgcreate vg0 "$T/pv.img" >/dev/null
vs lvcreate -L 320M -n lv0 vg0 >/dev/null
timeout -k 5 30 "$VOLSTACK" pvcreate "$R" >/dev/null || fail "pvcreate $R"
timeout -k 5 30 "$VOLSTACK" vgextend vg0 "$R" >/dev/null || fail "vgextend vg0 $R"
vs pvs --noheadings -o pv_name,vg_name | grep -qF "rbd:rbd/pv" || fail "pvs lacks the RBD PV: $(vs pvs)"

on_exit_stop_daemon
timeout -k 5 60 "$VOLSTACK" up || fail "up"
on_exit "umount -l $VS_STATE/dev"
mount_new_xfs_on vg0/lv0
start_manifest_writer
sleep 1
timeout -k 5 120 "$VOLSTACK" pvmove -i 2 "$T/pv.img" "$R" >"$T/in.out" ||
  fail "pvmove onto the RBD PV: $(cat "$T/in.out")"
vs lvs --noheadings -o devices vg0/lv0 | grep -qF "rbd:rbd/pv" ||
  fail "lv0 not on the RBD PV: $(vs lvs --noheadings -o devices vg0/lv0)"
verify_manifest "after the move onto RBD"
timeout -k 5 120 "$VOLSTACK" pvmove -i 2 "$R" "$T/pv.img" >"$T/out.out" ||
  fail "pvmove back to the file: $(cat "$T/out.out")"
vs lvs --noheadings -o devices vg0/lv0 | grep -qF "$T/pv.img" || fail "lv0 not back on the file"
vs lvs -a --noheadings -o lv_name vg0 | grep -q pvmove && fail "pvmove0 left behind"
stop_manifest_writer
verify_manifest "after the move back"
umount "$T/mnt"
mount "$loop" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest after remount"
umount "$T/mnt"
echo "moved 320M onto the RBD PV and back under a writer ($n files verified)"
tail -n 1 "$T/in.out"
echo PASS
