#!/bin/bash
# zfs send | zfs receive of the seed's stack (volume -> PV -> VG -> LV -> loop -> XFS) from
# pool A to pool B on other files:
#   1. through the daemon: XFS on vgs/lv on A/vol, files (manifest 1), frozen, snapshot @1;
#      send of the snapshot while the volume is in use works (to a file); while a send's
#      reader stalls, status and zfs list answer and the snapshot cannot be destroyed; a
#      receive into the volume in use is refused;
#   2. offline: receive the stream from the file into B/vol; export A; up: the VG comes up
#      from B, XFS mounts, manifest 1 verifies;
#   3. back on A: change the files (manifest 2), snapshot @2; B/vol was written by its
#      mount, so a receive without -F is refused; the incremental stream cut at several
#      points is refused each time with B unchanged (-F's rollback included); then
#      send -i | recv -F through a pipe; on B manifest 2 verifies;
#   3b. the incremental stream received with -s into another volume, cut at random points
#      and resumed each time from its token (send -t): identical to the unbroken receive;
#      -A discards a partial state;
#   4. bad input: an empty stdin, the same stream again, a stream from a newer version: one
#      error each, B unchanged.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount fsfreeze sha256sum
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

mkdir -p "$T/mnt"
truncate -s 1G "$T/a.img" "$T/b1.img" "$T/b2.img"
vs zpool create pa "$T/a.img"
vs zfs create -s -V 400M pa/vol
vs pvcreate pa/vol >/dev/null
vs vgcreate vgs pa/vol >/dev/null
vs lvcreate -L 320M -n lv vgs >/dev/null

on_exit_stop_daemon
up() {
  timeout 30 "$VOLSTACK" up >/dev/null
  on_exit "umount -l $VS_STATE/dev"
}
down() { timeout 30 "$VOLSTACK" down >/dev/null; }
mount_lv() {
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show vgs/lv)
  on_exit_detach_loop "$LOOP"
  mount "$LOOP" "$T/mnt"
  on_exit_umount "$T/mnt"
}
unmount_lv() {
  umount "$T/mnt"
  timeout 20 "$VOLSTACK" losetup -d "$LOOP"
}
snapshot_frozen() {
  sync
  fsfreeze -f "$T/mnt"
  timeout 20 "$VOLSTACK" zfs snapshot "$1" || {
    fsfreeze -u "$T/mnt"
    fail "snapshot $1"
  }
  fsfreeze -u "$T/mnt"
}
snapshots_of_b() { vs zfs list -H -p -t all -o name,guid,referenced -r pb; }

# 1. The stack on A, through the daemon.
up
LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show vgs/lv)
on_exit_detach_loop "$LOOP"
mkfs.xfs -q "$LOOP"
mount "$LOOP" "$T/mnt"
on_exit_umount "$T/mnt"
for i in 1 2 3 4 5; do head -c $((i * 700 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f*) >"$T/manifest1"
snapshot_frozen pa/vol@1
timeout 20 "$VOLSTACK" zfs send pa/vol@1 >"$T/full.stream" || fail "send of a volume in use"
# A send whose reader stalls lets other requests run meanwhile (status, zfs list), and
# holds its snapshot (a destroy is refused as busy); the stream, drained, is the same.
mkfifo "$T/stall"
timeout 30 "$VOLSTACK" zfs send pa/vol@1 >"$T/stall" &
send_pid=$!
exec 7<"$T/stall"
sleep 1  # the send fills the pipe and waits
timeout 5 "$VOLSTACK" status >/dev/null || fail "status waited for a stalled send"
timeout 5 "$VOLSTACK" zfs list >/dev/null || fail "zfs list waited for a stalled send"
expect_fail timeout 5 "$VOLSTACK" zfs destroy pa/vol@1
grep -q "busy" "$T/expect_fail.err" || fail "destroy of a snapshot being sent: $(cat "$T/expect_fail.err")"
timeout 30 cat <&7 >"$T/stalled.stream"
exec 7<&-
wait "$send_pid" || fail "the stalled send failed"
cmp -s "$T/stalled.stream" "$T/full.stream" || fail "the stalled send's stream differs"
# A stream pa/vol could take (from @1 to a snapshot destroyed since) but for its use.
timeout 20 "$VOLSTACK" zfs snapshot pa/vol@x
timeout 20 "$VOLSTACK" zfs send -i @1 pa/vol@x >"$T/x.stream"
timeout 20 "$VOLSTACK" zfs destroy pa/vol@x
expect_fail timeout 20 "$VOLSTACK" zfs recv -F pa/vol <"$T/x.stream"
grep -q "dataset is busy" "$T/expect_fail.err" ||
  fail "receive into a volume in use: $(cat "$T/expect_fail.err")"
vs zfs list -H -o name -t snapshot | grep -q "pa/vol@x" && fail "a refused receive made pa/vol@x"
unmount_lv
down

# 2. Offline: the file into B, A exported, the VG up from B.
vs vgchange -a n vgs >/dev/null
vs zpool create pb "$T/b1.img" "$T/b2.img"
timeout 20 "$VOLSTACK" zfs recv pb/vol <"$T/full.stream"
vs zfs list -H -o name -t snapshot | grep -qx "pb/vol@1" || fail "no pb/vol@1"
[ "$(vs zfs get -H -p -o value guid pa/vol@1)" = "$(vs zfs get -H -p -o value guid pb/vol@1)" ] ||
  fail "the received snapshot's guid differs"
vs zpool export pa
vs vgchange -a y vgs >/dev/null
up
mount_lv
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest1") || fail "manifest 1 on pool B"
unmount_lv
down
vs vgchange -a n vgs >/dev/null

# 3. Change the files on A, snapshot, incremental.
vs zpool export pb
vs zpool import -d "$T" pa >/dev/null
vs vgchange -a y vgs >/dev/null
up
mount_lv
rm "$T/mnt/f1"
head -c $((1500 * 1024)) /dev/urandom >"$T/mnt/f2"
head -c $((900 * 1024)) /dev/urandom >"$T/mnt/g1"
(cd "$T/mnt" && sha256sum f* g*) >"$T/manifest2"
snapshot_frozen pa/vol@2
unmount_lv
down
vs vgchange -a n vgs >/dev/null
vs zpool import -d "$T" pb >/dev/null
timeout 20 "$VOLSTACK" zfs send -i @1 pa/vol@2 >"$T/incr.stream"
size=$(stat -c %s "$T/incr.stream")
full=$(stat -c %s "$T/full.stream")
[ "$size" -lt $((full / 2)) ] || fail "incremental stream $size bytes, full $full"
before=$(snapshots_of_b)
# Mounting XFS on B wrote to pb/vol: without -F that is refused, as zfs does.
expect_fail vs zfs recv pb/vol <"$T/incr.stream"
grep -q "modified since most recent snapshot" "$T/expect_fail.err" ||
  fail "modified target: $(cat "$T/expect_fail.err")"
for cut in 10 64 200 $((size / 3)) $((size / 2)) $((size - 100)) $((size - 1)); do
  expect_fail timeout 20 "$VOLSTACK" zfs recv -F pb/vol < <(head -c "$cut" "$T/incr.stream")
  grep -q "invalid send stream" "$T/expect_fail.err" ||
    fail "cut at $cut: $(cat "$T/expect_fail.err")"
  [ "$(snapshots_of_b)" = "$before" ] || fail "a stream cut at $cut changed pool B"
done
timeout 30 "$VOLSTACK" zfs send -i pa/vol@1 pa/vol@2 | timeout 30 "$VOLSTACK" zfs recv -F -v pb/vol \
  >"$T/recv.out" 2>"$T/recv.err" || fail "send | recv: $(cat "$T/recv.err")"
# zfs 2.1's recv -v, on stdout: what is received into what, then size, whole seconds, rate.
grep -qx "receiving incremental stream of pa/vol@2 into pb/vol@2" "$T/recv.out" ||
  fail "recv -v: $(cat "$T/recv.out" "$T/recv.err")"
grep -qE '^received [0-9.]+[KMG]? stream in [0-9]+ seconds \([0-9.]+[KMG]?/sec\)$' "$T/recv.out" ||
  fail "recv -v summary: $(cat "$T/recv.out")"

# 3b. Resumable: @1 -> @2 into pb/res (recv -s), cut at random points, resumed each time
# from its receive_resume_token (send -t): the result is byte for byte pb/vol's.
timeout 20 "$VOLSTACK" zfs recv pb/res <"$T/full.stream"
cp "$T/incr.stream" "$T/next.stream"
for i in 1 2 3 4 5; do
  n=$(stat -c %s "$T/next.stream")
  [ "$n" -gt 400 ] || break
  cut=$((300 + RANDOM * 32768 % (n - 300) / 32768 + RANDOM % 1000))
  [ "$cut" -lt "$n" ] || cut=$((n - 1))
  expect_fail timeout 20 "$VOLSTACK" zfs recv -s pb/res < <(head -c "$cut" "$T/next.stream")
  token=$(vs zfs get -H -o value receive_resume_token pb/res)
  [ "${token:0:2}" = "1-" ] || fail "no resume token after a cut at $cut: $(cat "$T/expect_fail.err")"
  timeout 20 "$VOLSTACK" zfs send -t "$token" >"$T/next.stream"
done
timeout 20 "$VOLSTACK" zfs recv -s pb/res <"$T/next.stream" || fail "the resumed receive"
[ "$(vs zfs get -H -o value receive_resume_token pb/res)" = "-" ] || fail "a token after the end"
cmp <(timeout 20 "$VOLSTACK" lvm-cat pb/res) <(timeout 20 "$VOLSTACK" lvm-cat pb/vol) ||
  fail "the resumed receive differs from the unbroken one"
# A partial state refuses a plain receive until -A discards it.
vs zfs destroy -r pb/res
expect_fail vs zfs recv -s pb/res < <(head -c 20000 "$T/full.stream")
grep -q "zfs send -t 1-" "$T/expect_fail.err" || fail "recv -s: $(cat "$T/expect_fail.err")"
expect_fail vs zfs recv pb/res <"$T/full.stream"
grep -q "partially-complete state" "$T/expect_fail.err" || fail "$(cat "$T/expect_fail.err")"
vs zfs recv -A pb/res
timeout 20 "$VOLSTACK" zfs recv pb/res <"$T/full.stream" || fail "receive after -A"
vs zfs destroy -r pb/res

# 4. Bad input: one error each, nothing changed.
before=$(snapshots_of_b)
expect_fail vs zfs recv pb/vol </dev/null
grep -q "no send stream" "$T/expect_fail.err" || fail "empty: $(cat "$T/expect_fail.err")"
expect_fail vs zfs recv pb/vol <"$T/incr.stream"
grep -q "received before" "$T/expect_fail.err" || fail "twice: $(cat "$T/expect_fail.err")"
# Version 2 in BEGIN's header (bytes 16..23).
{ head -c 16 "$T/incr.stream"; printf '\002'; tail -c +18 "$T/incr.stream"; } >"$T/newer.stream"
expect_fail vs zfs recv pb/vol <"$T/newer.stream"
grep -q "newer than this volstack" "$T/expect_fail.err" || fail "newer: $(cat "$T/expect_fail.err")"
[ "$(snapshots_of_b)" = "$before" ] || fail "bad input changed pool B"

vs zpool export pa
vs vgchange -a y vgs >/dev/null
up
mount_lv
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest2") || fail "manifest 2 on pool B"
[ ! -e "$T/mnt/f1" ] || fail "a file removed before @2 is back"
unmount_lv
down
echo PASS
