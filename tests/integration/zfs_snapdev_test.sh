#!/bin/bash
# Snapshots as read-only devices (zfs's snapdev=visible), through the daemon:
#   1. XFS on a loop over a volume: files, freeze, snapshot, thaw (manifest 1); then the
#      live files change (manifest 2); zfs list -s/-S and written@snap;
#   2. snapdev=hidden (the default): no devfs file, and the snapshot is no device for NBD;
#   3. zfs set snapdev=visible: the snapshot's devfs file appears, read-only (0400), and a
#      write to it fails with EROFS/EPERM;
#   4. losetup binds it read-only; XFS mounts from it (ro,norecovery,nouuid) beside the
#      live, mounted volume and shows manifest 1 while the volume shows manifest 2; a write
#      to the loop device fails;
#   5. served over NBD read-only (nbdinfo says so, nbdcopy into it fails, the bytes read
#      are the devfs file's); `volstack status` shows the snapshot under its volume;
#   6. destroy of the snapshot is refused while it is bound; once unbound it goes, and so
#      does its devfs file; snapdev=hidden removes the other snapshot's file;
#   7. zfs promote of a clone: the origin's snapshot moves to the clone, the old origin
#      becomes its clone and can be destroyed, and the clone still mounts with manifest 1;
#      promote of a non-clone fails;
#   8. receive -F of a full stream into a volume whose snapshot is a visible, idle device:
#      the daemon lets go of the device and the receive replaces volume and snapshot.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount fsfreeze sha256sum nbdinfo nbdcopy
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

truncate -s 1G "$T/sd.img"
vs zpool create sd "$T/sd.img"
vs zfs create -s -b 4K -V 300M sd/vol
on_exit_stop_daemon
vs up
on_exit "umount -l $VS_STATE/dev"
DEV=$VS_STATE/dev
mkdir -p "$T/live" "$T/snap"

bind() { # name -> $LOOP
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "$1")
  on_exit_detach_loop "$LOOP"
}
wait_for() { # seconds test...
  local n=$(($1 * 10))
  shift
  for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
  return 1
}

# 1. XFS, files, a snapshot of the frozen filesystem, then changes.
bind sd/vol
LIVE=$LOOP
mkfs.xfs -q "$LIVE"
mount "$LIVE" "$T/live"
on_exit_umount "$T/live"
for i in 1 2 3 4; do head -c $((i * 256 * 1024)) /dev/urandom >"$T/live/f$i"; done
(cd "$T/live" && sha256sum f*) >"$T/manifest1"
sync
fsfreeze -f "$T/live"
timeout 20 "$VOLSTACK" zfs snapshot sd/vol@one && timeout 20 "$VOLSTACK" zfs snapshot sd/vol@two ||
  { fsfreeze -u "$T/live"; fail "snapshot"; }
fsfreeze -u "$T/live"
rm "$T/live/f1"
head -c $((700 * 1024)) /dev/urandom >"$T/live/f2"
head -c $((1024 * 1024)) /dev/urandom >"$T/live/later"
sync
(cd "$T/live" && sha256sum f* later) >"$T/manifest2"

# Listing: sorted by a property either way; written@ of the first snapshot equals written
# (both snapshots hold the same txg's data).
[ "$(vs zfs list -H -t snapshot -o name -S createtxg | head -n 1)" = "sd/vol@two" ] ||
  fail "list -S createtxg: $(vs zfs list -H -t snapshot -o name,createtxg -S createtxg)"
[ "$(vs zfs list -H -t snapshot -o name -s createtxg | head -n 1)" = "sd/vol@one" ] ||
  fail "list -s createtxg: $(vs zfs list -H -t snapshot -o name,createtxg -s createtxg)"
expect_fail vs zfs list -s nosuchprop
for _ in $(seq 40); do  # the space columns follow the committed txgs (5 s timer)
  [ "$(vs zfs get -H -p -o value written sd/vol)" -gt $((1024 * 1024)) ] && break
  sleep 0.5
done
# A timer commit may land between two reads: the same numbers within a few tries.
same=0
for _ in $(seq 5); do
  read -r a b c < <(vs zfs list -H -p -o written,written@one,written@sd/vol@two sd/vol)
  [ "$a" = "$b" ] && [ "$a" = "$c" ] && [ "$a" -gt $((1024 * 1024)) ] && { same=1; break; }
  sleep 1
done
((same)) || fail "written $a, written@one $b, written@sd/vol@two $c"

# 2. Hidden by default: no file, no NBD export of it.
[ "$(vs zfs get -H -o value,source snapdev sd/vol)" = "hidden	default" ] ||
  fail "snapdev default: $(vs zfs get -H -o value,source snapdev sd/vol)"
[ ! -e "$DEV/sd/vol@one" ] || fail "a hidden snapshot has a devfs file"
expect_fail timeout 20 "$VOLSTACK" nbd serve sd/vol@one
grep -q "hidden" "$T/expect_fail.err" || fail "nbd serve of a hidden snapshot: $(cat "$T/expect_fail.err")"
expect_fail vs zfs set snapdev=maybe sd/vol

# 3. Visible: a read-only file per snapshot.
timeout 20 "$VOLSTACK" zfs set snapdev=visible sd/vol
[ "$(vs zfs get -H -o value,source snapdev sd/vol)" = "visible	local" ] || fail "snapdev not set"
wait_for 10 test -e "$DEV/sd/vol@one" || fail "no devfs file for sd/vol@one: $(ls -R "$DEV")"
[ -e "$DEV/sd/vol@two" ] || fail "no devfs file for sd/vol@two"
[ "$(stat -c %a "$DEV/sd/vol@one")" = 400 ] || fail "mode $(stat -c %a "$DEV/sd/vol@one")"
[ "$(stat -c %s "$DEV/sd/vol@one")" = $((300 * 1024 * 1024)) ] || fail "size of the snapshot file"
if timeout 20 dd if=/dev/zero of="$DEV/sd/vol@one" bs=4096 count=1 conv=notrunc 2>"$T/dd.err"; then
  fail "a write to the snapshot file succeeded"
fi
grep -Eq "Read-only file system|Operation not permitted" "$T/dd.err" || fail "write error: $(cat "$T/dd.err")"

# 4. A read-only loop over it; the old filesystem beside the live one.
bind sd/vol@one
SNAP=$LOOP
[ "$(losetup -n -O RO "$SNAP" | tr -d ' ')" = 1 ] || fail "$SNAP is not read-only"
mount -o ro,norecovery,nouuid "$SNAP" "$T/snap"
on_exit_umount "$T/snap"
(cd "$T/snap" && sha256sum -c --quiet "$T/manifest1") || fail "manifest 1 on the snapshot"
[ ! -e "$T/snap/later" ] || fail "the snapshot shows a later file"
(cd "$T/live" && sha256sum -c --quiet "$T/manifest2") || fail "manifest 2 on the live volume"
if timeout 20 dd if=/dev/zero of="$SNAP" bs=4096 count=1 oflag=direct 2>/dev/null; then
  fail "a write to the read-only loop device succeeded"
fi

# 5. NBD, read-only; status.
addr=$(timeout 20 "$VOLSTACK" nbd serve sd/vol@two)
uri="nbd+unix:///sd/vol@two?socket=${addr#unix:}"
timeout 20 nbdinfo --json "$uri" >"$T/info"
grep -q '"is_read_only": true' "$T/info" || fail "NBD export not read-only: $(cat "$T/info")"
head -c 4096 /dev/urandom >"$T/junk"
if timeout 20 nbdcopy "$T/junk" "$uri" 2>/dev/null; then fail "nbdcopy wrote to a snapshot"; fi
timeout 30 nbdcopy "$uri" "$T/two.nbd"
cmp "$T/two.nbd" "$DEV/sd/vol@two" || fail "NBD bytes differ from the devfs file's"
vs status >"$T/status"
grep -q "volume sd/vol .*snapshots 2" "$T/status" || fail "status: $(cat "$T/status")"
grep -q "snapshot sd/vol@one .*device (read-only)" "$T/status" || fail "status: $(cat "$T/status")"

# 6. Busy while bound or served; free once not.
expect_fail timeout 20 "$VOLSTACK" zfs destroy sd/vol@one
grep -q "busy" "$T/expect_fail.err" || fail "destroy of a bound snapshot: $(cat "$T/expect_fail.err")"
umount "$T/snap"
timeout 20 "$VOLSTACK" losetup -d "$SNAP"
timeout 20 "$VOLSTACK" zfs destroy sd/vol@one
vs zfs list -H -t snapshot -o name | grep -q "sd/vol@one" && fail "sd/vol@one not destroyed"
wait_for 10 test ! -e "$DEV/sd/vol@one" || fail "the destroyed snapshot's file stayed"
timeout 20 "$VOLSTACK" nbd stop "$addr" >/dev/null
timeout 20 "$VOLSTACK" zfs set snapdev=hidden sd/vol
wait_for 10 test ! -e "$DEV/sd/vol@two" || fail "snapdev=hidden left the file"

# 7. promote.
timeout 20 "$VOLSTACK" zfs clone sd/vol@two sd/copy
expect_fail vs zfs promote sd/vol
grep -q "not a cloned filesystem" "$T/expect_fail.err" || fail "promote of a non-clone: $(cat "$T/expect_fail.err")"
timeout 20 "$VOLSTACK" zfs promote sd/copy
[ "$(vs zfs list -H -t snapshot -o name)" = "sd/copy@two" ] || fail "after promote: $(vs zfs list -H -t all -o name,origin)"
[ "$(vs zfs get -H -o value origin sd/vol)" = "sd/copy@two" ] || fail "origin of sd/vol"
[ "$(vs zfs get -H -o value origin sd/copy)" = "-" ] || fail "origin of sd/copy"
umount "$T/live"
timeout 20 "$VOLSTACK" losetup -d "$LIVE"
timeout 20 "$VOLSTACK" zfs destroy sd/vol
bind sd/copy
mount -o ro,norecovery,nouuid "$LOOP" "$T/snap"
(cd "$T/snap" && sha256sum -c --quiet "$T/manifest1") || fail "manifest 1 on the promoted clone"
umount "$T/snap"

# 8. receive -F over a visible snapshot device nobody uses.
timeout 20 "$VOLSTACK" losetup -d "$LOOP"
timeout 20 "$VOLSTACK" zfs set snapdev=visible sd/copy
wait_for 10 test -e "$DEV/sd/copy@two" || fail "no devfs file for sd/copy@two"
timeout 30 "$VOLSTACK" zfs send sd/copy@two >"$T/full"
timeout 30 "$VOLSTACK" zfs receive -F sd/copy <"$T/full" 2>"$T/recv.err" ||
  fail "receive -F over a visible snapshot: $(cat "$T/recv.err")"
[ "$(vs zfs list -H -t snapshot -o name)" = "sd/copy@two" ] || fail "after receive -F: $(vs zfs list -H -t all -o name)"
echo PASS
