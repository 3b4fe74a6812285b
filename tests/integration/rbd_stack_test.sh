#!/usr/bin/env bash
# volstack on Ceph RBD images (remote/rbd_device.h), against a throwaway cluster:
#   1. a pool on two RBD images, and the seed's stack on it: volume -> PV -> VG -> LV ->
#      loop (through devfs) -> XFS, with a checksum manifest;
#   2. kill -9 of the daemon, `volstack up`: the loop binding is back, the manifest verifies
#      (read through a fresh librbd client, after the old one's lock has been taken over);
#   3. export/import -d of the RBD pool: `zpool import -d rbd:...` finds it;
#   4. the cluster down at `up`: the RBD pool is UNAVAIL with the reason, a pool on a file
#      comes up all the same; with the cluster back, `up` brings everything.
#   Bad names: one clear error, nothing created.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/ceph_lib.sh"
need_root
need_cmd mkfs.xfs losetup mount sha256sum
[ -e /dev/fuse ] || skip "needs /dev/fuse"
start_ceph_cluster

rbd_create a 1G
rbd_create b 1G
A=$(rbd_name a)
B=$(rbd_name b)

echo "== bad names change nothing"
expect_fail timeout -k 5 30 "$VOLSTACK" zpool create bad "rbd:rbd/nope:conf=$CEPH_CONF"
grep -q "rbd/nope" "$T/expect_fail.err" || fail "missing image: $(cat "$T/expect_fail.err")"
expect_fail timeout -k 5 30 "$VOLSTACK" zpool create bad "rbd:rbd"
grep -q "rbd:POOL/IMAGE" "$T/expect_fail.err" || fail "bad name: $(cat "$T/expect_fail.err")"
vs zpool list -H -o name | grep -qx bad && fail "pool created from a bad name"

echo "== 1. the seed's stack on a pool of two RBD images"
timeout -k 5 30 "$VOLSTACK" zpool create trunk "$A" "$B" || fail "zpool create on RBD"
vs zpool status trunk | grep -qF "rbd:rbd/b" || fail "status lacks the RBD vdev: $(vs zpool status trunk)"
truncate -s 256M "$T/local.img"
vs zpool create local "$T/local.img"
vs zfs create -V 64M local/vol
vs zfs create -V 768M trunk/funk
vs pvcreate trunk/funk >/dev/null
vs vgcreate vg0 trunk/funk >/dev/null
vs lvcreate -L 512M -n lv0 vg0 >/dev/null

on_exit_stop_daemon
timeout -k 5 60 "$VOLSTACK" up || fail "up"
on_exit "umount -l $VS_STATE/dev"
[ -f "$VS_STATE/dev/vg0/lv0" ] || fail "vg0/lv0 not in devfs: $(ls -R "$VS_STATE/dev")"
mount_new_xfs_on vg0/lv0
for i in $(seq 1 20); do head -c $((i * 61 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f* >"$T/manifest")
sync

echo "== 2. kill -9 of the daemon, then up"
daemon_pid=$(cat "$VS_STATE/daemon.pid")
kill -9 "$daemon_pid"
for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
umount -l "$T/mnt"
losetup -d "$loop" || true
for _ in $(seq 100); do losetup "$loop" >/dev/null 2>&1 || break; sleep 0.1; done
umount -l "$VS_STATE/dev" || true
timeout -k 5 60 "$VOLSTACK" up || fail "up after kill -9"
loop2=$(vs losetup -a | awk -F: -v f="($VS_STATE/dev/vg0/lv0)" 'index($0, f) {print $1}')
[ -n "$loop2" ] || fail "up did not restore the loop binding: $(vs losetup -a)"
echo 3 >/proc/sys/vm/drop_caches
mount "$loop2" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest after kill -9 and up"
umount "$T/mnt"
timeout -k 5 60 "$VOLSTACK" down || fail "down"

echo "== 3. export and import -d of the RBD pool"
vs vgchange -an vg0 >/dev/null
timeout -k 5 30 "$VOLSTACK" zpool export trunk || fail "export"
timeout -k 5 30 "$VOLSTACK" zpool import -d "$A" >"$T/import.list" 2>&1 || true
grep -q "pool: trunk" "$T/import.list" || fail "import -d $A: $(cat "$T/import.list")"
timeout -k 5 30 "$VOLSTACK" zpool import -d "$A" -d "$B" trunk || fail "import -d trunk"
vs zpool list -H -o name,health | grep -qx $'trunk\tONLINE' || fail "trunk: $(vs zpool list)"
vs vgchange -ay vg0 >/dev/null

echo "== 4. the cluster down at up"
"$CEPH_SCRIPT" stop "$T/ceph"
start=$(date +%s)
expect_fail timeout -k 5 60 "$VOLSTACK" up
echo "up with the cluster down took $(($(date +%s) - start)) s"
vs status >"$T/status" 2>&1 || true
grep -q "^  pool trunk  UNAVAIL" "$T/status" || fail "trunk not UNAVAIL: $(cat "$T/status")"
grep -q "^  pool local  ONLINE" "$T/status" || fail "local did not come up: $(cat "$T/status")"
[ -f "$VS_STATE/dev/local/vol" ] || fail "local/vol not in devfs: $(ls -R "$VS_STATE/dev")"
grep -q "rbd:rbd/a" "$T/expect_fail.err" "$T/status" ||
  echo "note: up's error: $(cat "$T/expect_fail.err")"
timeout -k 5 60 "$VOLSTACK" down --force || fail "down --force"
echo PASS
