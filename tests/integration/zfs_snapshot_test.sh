#!/bin/bash
# zfs snapshot, rollback, clone and destroy of a pool volume carrying XFS, through the daemon:
#   1. XFS on a loop over the volume: write files, freeze, snapshot, thaw (manifest 1);
#   2. rollback is refused while the loop is bound, changing nothing;
#   3. change the files (manifest 2 differs); zfs list -t snapshot shows the snapshot's
#      space; destroy -nv says what it would free and frees nothing;
#   4. take the loop down, roll back, bind and mount again: manifest 1 verifies, the later
#      files are gone;
#   5. a clone of the snapshot mounts (read-only, norecovery) with manifest 1;
#   6. bad input (a misplaced '@', a snapshot of a snapshot, a 256-character name, rollback
#      to another volume's snapshot, destroy of a snapshot with clones without -R) fails
#      with zfs's exit code (2 usage, 1 failure) and changes nothing; so does destroy of a
#      held snapshot (zfs hold / holds / release).
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount umount fsfreeze sha256sum
[ -e /dev/fuse ] || skip "needs /dev/fuse"
[ -e /dev/loop-control ] || skip "needs loop devices"

truncate -s 1G "$T/snp.img"
vs zpool create snp "$T/snp.img"
vs zfs create -s -b 4K -V 300M snp/vol
vs zfs create -s -V 16M snp/other
on_exit_stop_daemon
vs up
on_exit "umount -l $VS_STATE/dev"
mkdir -p "$T/mnt"

bind() {
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "$1")
  on_exit_detach_loop "$LOOP"
}
bind_and_mount() { # volume [mount options]
  bind "$1"
  mount ${2:+-o "$2"} "$LOOP" "$T/mnt"
}
unmount_and_unbind() {
  umount "$T/mnt"
  timeout 20 "$VOLSTACK" losetup -d "$LOOP"
}

# 1. Files, a frozen filesystem, a snapshot.
bind snp/vol
mkfs.xfs -q "$LOOP"
mount "$LOOP" "$T/mnt"
on_exit_umount "$T/mnt"
for i in 1 2 3 4 5 6; do head -c $((i * 300 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f*) >"$T/manifest1"
sync
fsfreeze -f "$T/mnt"
timeout 20 "$VOLSTACK" zfs snapshot snp/vol@first || { fsfreeze -u "$T/mnt"; fail "snapshot"; }
fsfreeze -u "$T/mnt"
vs zfs list -H -t snapshot -o name | grep -qx "snp/vol@first" || fail "no snapshot listed"

# 2. Busy: refused, nothing changed.
expect_fail vs zfs rollback snp/vol@first
grep -q "busy" "$T/expect_fail.err" || fail "rollback of a bound volume: $(cat "$T/expect_fail.err")"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest1") || fail "a refused rollback changed data"

# 3. Change the files; the snapshot now holds the old blocks alone.
rm "$T/mnt/f1"
head -c $((900 * 1024)) /dev/urandom >"$T/mnt/f2"
head -c $((2 * 1024 * 1024)) /dev/urandom >"$T/mnt/later"
sync
# Space columns follow the committed txgs (the timer's, 5 s), as zfs's do.
for _ in $(seq 40); do
  read -r _ used written < <(vs zfs list -H -p -t snapshot -o name,used,written snp/vol@first)
  [ "$used" -gt 0 ] && break
  sleep 0.5
done
[ "$used" -gt 0 ] || fail "snapshot used $used after overwrites"
[ "$written" -gt $((6 * 1024 * 1024)) ] || fail "snapshot written $written"
vs zfs destroy -nv snp/vol@first >"$T/dry"
grep -qx "would destroy snp/vol@first" "$T/dry" || fail "dry run: $(cat "$T/dry")"
grep -q "^would reclaim " "$T/dry" || fail "dry run: $(cat "$T/dry")"
vs zfs list -H -t snapshot -o name | grep -qx "snp/vol@first" || fail "a dry run destroyed"

# 4. Down, roll back, up: the first manifest.
unmount_and_unbind
timeout 20 "$VOLSTACK" zfs rollback snp/vol@first
bind_and_mount snp/vol
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest1") || fail "manifest 1 after rollback"
[ ! -e "$T/mnt/later" ] || fail "a file written after the snapshot survived the rollback"
unmount_and_unbind

# 5. A clone shares the snapshot's data.
timeout 20 "$VOLSTACK" zfs clone snp/vol@first snp/clone
vs zfs list -H -o name,origin snp/clone | grep -qx "snp/clone	snp/vol@first" ||
  fail "origin: $(vs zfs list -H -o name,origin snp/clone)"
bind_and_mount snp/clone norecovery,ro
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest1") || fail "manifest 1 on the clone"
unmount_and_unbind

# 6. Bad input: one clear error, zfs's exit code, nothing changed.
vs zfs snapshot snp/other@o
before=$(vs zfs list -H -p -t all -o name,referenced)
expect_code() { # code command...
  local want=$1 rc=0
  shift
  "$@" 2>"$T/err" || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, want $want: $(cat "$T/err")"
  [ "$(grep -c . "$T/err")" -ge 1 ] || fail "$*: no error message"
}
expect_code 2 vs zfs snapshot snp/vol
expect_code 2 vs zfs snapshot snp@x/vol
expect_code 2 vs zfs snapshot snp/vol@first@again
expect_code 2 vs zfs snapshot "snp/vol@$(printf 'x%.0s' $(seq 250))"
expect_code 1 vs zfs snapshot snp/nope@x
expect_code 1 vs zfs snapshot snp/vol@first
expect_code 1 vs zfs rollback snp/vol@o
expect_code 1 vs zfs destroy snp/vol@first
grep -q "dependent clones" "$T/err" || fail "destroy with clones: $(cat "$T/err")"
expect_code 1 vs zfs destroy snp/vol
vs zfs hold keep snp/other@o
vs zfs holds -H snp/other@o | grep -q "^snp/other@o	keep	" || fail "holds: $(vs zfs holds snp/other@o)"
expect_code 1 vs zfs destroy snp/other@o
expect_code 1 vs zfs hold keep snp/other@o
vs zfs release keep snp/other@o
[ "$(vs zfs list -H -p -t all -o name,referenced)" = "$before" ] || fail "bad input changed something"

# -R takes the clone with it; -r the volume's snapshots.
timeout 20 "$VOLSTACK" zfs destroy -R snp/vol@first
vs zfs list -H -t all -o name | grep -q "snp/clone\|snp/vol@first" && fail "destroy -R left datasets"
timeout 20 "$VOLSTACK" zfs destroy -r snp/other
echo PASS
