#!/bin/bash
# The seed's exact step: real lvm2 pvcreate on a loop device bound to a volstack devfs file,
# then lvm2's own pvs sees the PV and its label is in the backing file where LVM2 puts it
# (the devfs path carries the bytes unchanged).
source "$(dirname "$0")/lib.sh"
need_root
need_cmd pvcreate pvs losetup
[ -c /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"
setup_lvm2_env

truncate -s 256M "$T/pv.img"
vs devfs pv="$T/pv.img"
on_exit_kill "$(cat "$VS_STATE/devfs.pid")"
LOOP=$(vs losetup -f --show pv)
on_exit_detach_loop "$LOOP"

pvcreate -q "$LOOP" >/dev/null || fail "pvcreate on $LOOP"
pvs --noheadings -o pv_name,pv_size --units b "$LOOP" | grep -q "$LOOP" || fail "pvs does not list $LOOP"
# The label sector (sector 1) of the backing file holds LVM2's label.
[ "$(dd if="$T/pv.img" bs=512 skip=1 count=1 status=none | head -c 8)" = LABELONE ] ||
  fail "no LVM2 label in the backing file"
dd if="$T/pv.img" bs=512 skip=1 count=1 status=none | grep -aq 'LVM2 001' || fail "label type"
# volstack reads the PV it now holds, when its LVM verbs are built in.
if vs --help 2>/dev/null | grep -qE "^ +pvs "; then
  vs losetup -d "$LOOP"
  kill "$(cat "$VS_STATE/devfs.pid")"
  for _ in $(seq 50); do [ -e "$VS_STATE/devfs.pid" ] || break; sleep 0.1; done
  vs pvs "$T/pv.img" | grep -q "pv.img" || fail "volstack pvs does not read the PV: $(vs pvs "$T/pv.img" 2>&1)"
fi
echo PASS
