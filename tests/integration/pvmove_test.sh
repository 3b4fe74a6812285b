#!/usr/bin/env bash
# pvmove with real programs.
#   1. Offline, files as PVs: a move stopped part way (as a crash would stop it) leaves
#      metadata lvm2's own pvs/lvs read, with [pvmove0] and the Move column; `pvmove` with no
#      argument resumes it, and lvm2 then reads plain metadata with the LV on the new PV.
#   2. Online, through the daemon: an LV on a file PV, bound to a loop device via devfs,
#      XFS mounted, a writer adding files (each fsync'ed, then added to a checksum manifest)
#      while `volstack pvmove` moves the LV into a pool volume (trunk/funk) and back out.
#      Other commands answer during the move; the manifest verifies afterwards.
#   1b. `volstack up` finishes a move that was interrupted.
#   1c. `-b` without a daemon: errors still come back at once; the move goes on in a
#      background process; a second mover is refused while it runs; `--abort` stops it and
#      reverts; `pvmove -b` with no argument resumes an interrupted move in the background.
#   3. Bad input: an unknown PV, a PV of another VG, overlapping ranges; nothing changes.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs losetup mount sha256sum lvm
[ -e /dev/fuse ] || skip "needs /dev/fuse"
setup_lvm2_env

echo "== 1. offline: interrupted move, as lvm2 sees it; resume"
truncate -s 64M "$T/a.img" "$T/b.img" "$T/c.img"
vs pvcreate "$T/a.img" "$T/b.img" "$T/c.img" >/dev/null
vs vgcreate -s 1m vgm "$T/a.img" "$T/b.img" >/dev/null
vs vgcreate -s 1m vgo "$T/c.img" >/dev/null
vs lvcreate -L 40m -n lm vgm "$T/a.img" >/dev/null
expect_fail env VOLSTACK_PVMOVE_STOP_AFTER_BYTES=$((8 << 20)) "$VOLSTACK" pvmove "$T/a.img" "$T/b.img"
vs lvs -a --noheadings -o lv_name,move_pv vgm >"$T/lvs.vs"
grep -q '\[pvmove0\] *'"$T/a.img" "$T/lvs.vs" || fail "volstack lvs during the move: $(cat "$T/lvs.vs")"
la=$(losetup -f -r --show "$T/a.img"); on_exit_detach_loop "$la"
lb=$(losetup -f -r --show "$T/b.img"); on_exit_detach_loop "$lb"
lvm2_config_for "$la" "$lb"  # other tests' VGs (a vgm too) stay out of lvm2's sight
lvm lvs "${LC[@]}" -a --noheadings -o lv_name,lv_attr,move_pv vgm >"$T/lvs.lvm2" 2>"$T/lvm2.err" ||
  fail "lvm2 lvs rejects the in-progress metadata: $(cat "$T/lvm2.err")"
grep -q '\[pvmove0\] *p' "$T/lvs.lvm2" || fail "lvm2 does not show pvmove0: $(cat "$T/lvs.lvm2")"
grep -q "$la" "$T/lvs.lvm2" || fail "lvm2 lacks the Move PV: $(cat "$T/lvs.lvm2")"
losetup -d "$la"; losetup -d "$lb"
vs pvmove >"$T/resume.out" || fail "resume failed"
grep -q "Moved: 100.00%" "$T/resume.out" || fail "no final progress line: $(cat "$T/resume.out")"
la=$(losetup -f -r --show "$T/a.img"); on_exit_detach_loop "$la"
lb=$(losetup -f -r --show "$T/b.img"); on_exit_detach_loop "$lb"
lvm2_config_for "$la" "$lb"  # other tests' VGs (a vgm too) stay out of lvm2's sight
lvm vgck "${LC[@]}" vgm 2>"$T/lvm2.err" || fail "lvm2 vgck after the move: $(cat "$T/lvm2.err")"
devs=$(lvm lvs "${LC[@]}" -a --noheadings -o lv_name,devices vgm 2>/dev/null)
echo "$devs" | grep -q pvmove && fail "pvmove0 left behind: $devs"
echo "$devs" | grep -q "lm *$lb(" || fail "lvm2 does not see lm on the destination: $devs"
losetup -d "$la"; losetup -d "$lb"

echo "== 3. bad input changes nothing"
before=$(vs lvs -a --noheadings -o lv_name,devices vgm)
expect_fail vs pvmove "$T/nope.img"
expect_fail vs pvmove "$T/b.img" "$T/c.img"     # c is in another VG
grep -q "not found in Volume Group" "$T/expect_fail.err" || fail "other VG: $(cat "$T/expect_fail.err")"
expect_fail vs pvmove "$T/b.img:0-9:5-12" "$T/a.img"
expect_fail vs pvmove "$T/b.img" "$T/a.img:0-3"  # 4 PEs for 40
[ "$(vs lvs -a --noheadings -o lv_name,devices vgm)" = "$before" ] || fail "bad input changed the VG"

echo "== 1b. up resumes an interrupted move"
expect_fail env VOLSTACK_PVMOVE_STOP_AFTER_BYTES=$((8 << 20)) "$VOLSTACK" pvmove "$T/b.img" "$T/a.img"
vs lvs -a --noheadings -o lv_name vgm | grep -q pvmove0 || fail "the move was not left interrupted"
on_exit_stop_daemon
vs up
for _ in $(seq 100); do
  vs lvs -a --noheadings -o lv_name vgm | grep -q pvmove0 || break
  sleep 0.2
done
devs=$(vs lvs -a --noheadings -o lv_name,devices vgm)
echo "$devs" | grep -q pvmove0 && fail "up did not finish the move: $devs"
echo "$devs" | grep -q "lm *$T/a.img(" || fail "lm not on the destination after up: $devs"
vs down

echo "== 1c. -b without a daemon"
# lm is on a.img (1b). Bad input still fails at once, with nothing started.
expect_fail vs pvmove -b "$T/nope.img"
expect_fail vs pvmove -b "$T/a.img" "$T/c.img"
grep -q "not found in Volume Group" "$T/expect_fail.err" || fail "-b other VG: $(cat "$T/expect_fail.err")"
vs lvs -a --noheadings -o lv_name vgm | grep -q pvmove0 && fail "a refused -b left a move"
# The background mover's PID is in the VG's mover lock file.
mover_pid() { head -n 1 "$VS_STATE/pvmove.vgm.lock" 2>/dev/null | tr -d '\n' || true; }
alive() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${s#Z}" = "$s" ]; }
kill_mover() { local p; p=$(mover_pid); [ -z "$p" ] || ! alive "$p" || kill "$p" || true; }
on_exit kill_mover
wait_no_move() {
  for _ in $(seq 150); do
    vs lvs -a --noheadings -o lv_name vgm | grep -q pvmove0 || return 0
    sleep 0.2
  done
  fail "the background move did not end: $(cat "$VS_STATE/pvmove.vgm.log")"
}
# A slowed move (40 regions x 100 ms): -b returns while it runs.
start=$(date +%s%N)
VOLSTACK_PVMOVE_REGION_DELAY_MS=100 "$VOLSTACK" pvmove -b "$T/a.img" "$T/b.img"
[ $(( ($(date +%s%N) - start) / 1000000 )) -lt 2000 ] || fail "pvmove -b did not return at once"
pid=$(mover_pid)
[ -n "$pid" ] && alive "$pid" || fail "no background mover (pid '$pid'): $(cat "$VS_STATE/pvmove.vgm.log")"
vs lvs -a --noheadings -o lv_name vgm | grep -q pvmove0 || fail "no move in progress after -b"
expect_fail vs pvmove                               # a second mover is refused
grep -q "is running in process $pid" "$T/expect_fail.err" || fail "second mover: $(cat "$T/expect_fail.err")"
vs pvmove --abort                                   # stops the mover, then reverts
alive "$pid" && fail "the background mover outlived the abort"
devs=$(vs lvs -a --noheadings -o lv_name,devices vgm)
echo "$devs" | grep -q pvmove0 && fail "abort left pvmove0: $devs"
echo "$devs" | grep -q "lm *$T/a.img(" || fail "abort did not put lm back: $devs"
# Interrupted (as a crash would), then resumed in the background by `pvmove -b`.
expect_fail env VOLSTACK_PVMOVE_STOP_AFTER_BYTES=$((8 << 20)) "$VOLSTACK" pvmove "$T/a.img" "$T/b.img"
vs lvs -a --noheadings -o lv_name vgm | grep -q pvmove0 || fail "the move was not left interrupted"
vs pvmove -b
wait_no_move
devs=$(vs lvs -a --noheadings -o lv_name,devices vgm)
echo "$devs" | grep -q "lm *$T/b.img(" || fail "lm not on b.img after the background move: $devs"
grep -q "Moved: 100.00%" "$VS_STATE/pvmove.vgm.log" || fail "mover log: $(cat "$VS_STATE/pvmove.vgm.log")"

echo "== 2. online: into ZFS and back out under a writer"
truncate -s 1G "$T/trunk.img" "$T/pv.img"
vs zpool create trunk "$T/trunk.img"
vs zfs create -V 400M trunk/funk
vs pvcreate "$T/pv.img" trunk/funk >/dev/null
vs vgcreate vg0 "$T/pv.img" trunk/funk >/dev/null
vs lvcreate -L 320M -n lv0 vg0 "$T/pv.img" >/dev/null
vs up
on_exit "umount -l $VS_STATE/dev"
mount_new_xfs_on vg0/lv0
start_manifest_writer
sleep 1
vs pvmove -i 1 "$T/pv.img" trunk/funk >"$T/in.out" || fail "pvmove into trunk/funk: $(cat "$T/in.out")"
grep -q "trunk/funk" <(vs lvs --noheadings -o devices vg0/lv0) || fail "lv0 not on trunk/funk"
vs pvmove -b trunk/funk "$T/pv.img"
# The daemon keeps answering while the move runs in it, and its lvs never reads metadata
# the mover is half-way through committing (no warning, pvmove0 in every answer until the
# end).
for i in $(seq 20); do
  vs lvs -a --noheadings -o lv_name,copy_percent vg0 >"$T/during" 2>"$T/during.err" ||
    fail "lvs during the move: $(cat "$T/during.err")"
  [ -s "$T/during.err" ] && fail "lvs warned during the move: $(cat "$T/during.err")"
  grep -q lv0 "$T/during" || fail "lvs during the move lost lv0: $(cat "$T/during")"
done
# Two clients at once while the move runs in the daemon: each gets its own output only.
timeout 30 "$VOLSTACK" zfs list -H -o name >"$T/c1" 2>"$T/c1.err" &
c1=$!
timeout 30 "$VOLSTACK" lvs --noheadings -o lv_name vg0 >"$T/c2" 2>"$T/c2.err" &
c2=$!
wait $c1 || fail "zfs list beside lvs: $(cat "$T/c1.err")"
wait $c2 || fail "lvs beside zfs list: $(cat "$T/c2.err")"
[ "$(sort -u "$T/c1")" = "$(printf 'trunk\ntrunk/funk')" ] || fail "zfs list got: $(cat "$T/c1")"
grep -v '^ *lv0 *$' "$T/c2" | grep -q . && fail "lvs got: $(cat "$T/c2")"
[ -s "$T/c1.err" ] || [ -s "$T/c2.err" ] && fail "stderr: $(cat "$T/c1.err" "$T/c2.err")"
# The move is a job of the daemon: listed, and waited for by id.
vs jobs >"$T/jobs" || fail "jobs: $(cat "$T/jobs")"
id=$(awk '$2 == "pvmove" && $3 == "vg0" { print $1 }' "$T/jobs" | tail -1)
[ -n "$id" ] || fail "jobs does not list the move: $(cat "$T/jobs")"
vs pvmove -i 1 >"$T/out.out" || fail "following the move back out: $(cat "$T/out.out")"
timeout 30 "$VOLSTACK" jobs -w "$id" >"$T/wait.out" || fail "jobs -w $id: $(cat "$T/wait.out")"
grep -qx "job $id (pvmove vg0): done" "$T/wait.out" || fail "jobs -w said: $(cat "$T/wait.out")"
grep -q "$T/pv.img" <(vs lvs --noheadings -o devices vg0/lv0) || fail "lv0 not back on the file"
vs lvs -a --noheadings -o lv_name vg0 | grep -q pvmove && fail "pvmove0 left behind"
stop_manifest_writer
verify_manifest "after the moves"
umount "$T/mnt"
mount "$loop" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest after remount"
umount "$T/mnt"
echo "moved 320M into trunk/funk and back under a writer ($n files verified)"
cat "$T/in.out" | tail -1
echo PASS
