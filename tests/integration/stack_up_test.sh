#!/usr/bin/env bash
# The seed's stack, built with volstack, survives a daemon crash and a clean restart:
# pool `trunk` on a file, volume trunk/funk, PV on it (no loop device), VG, LV, the LV bound
# to a kernel loop device through devfs, XFS on it with a checksum manifest. Then:
#   1. kill -9 the daemon, clear what the kernel still holds, `volstack up`: the loop binding
#      comes back and the manifest verifies;
#   2. `volstack down` refuses while XFS is mounted; after umount it takes the stack down, and
#      `volstack up` brings it back again;
#   3. the CLI gives the same output with and without the daemon;
#   4. bad input: a second daemon, a stale socket, a missing vdev at `up`.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs losetup mount sha256sum
[ -e /dev/fuse ] || skip "needs /dev/fuse"

truncate -s 2G "$T/trunk.img"
vs zpool create trunk "$T/trunk.img"
vs zfs create -V 1G trunk/funk
vs pvcreate trunk/funk
vs vgcreate vg0 trunk/funk
vs lvcreate -L 512M -n lv0 vg0

# Same answers offline and through the daemon.
vs zfs list -H -p >"$T/zfs.offline"
vs lvs --noheadings -o lv_name,vg_name,lv_size >"$T/lvs.offline"

# What a successful `up` must have done: a daemon process is running under the PID it
# recorded, its control socket is there, devfs serves the pool volume and the LV, and the
# live status (not the offline one, which lists pools too) says so.
assert_up() {
  [ -S "$VS_STATE/daemon.sock" ] || fail "no control socket after up"
  daemon_pid=$(cat "$VS_STATE/daemon.pid") || fail "no daemon.pid after up"
  kill -0 "$daemon_pid" 2>/dev/null || fail "daemon $daemon_pid from daemon.pid is not running"
  [ "$(readlink "/proc/$daemon_pid/exe")" = "$(readlink -f "$VOLSTACK")" ] ||
    fail "PID $daemon_pid is not volstack: $(readlink "/proc/$daemon_pid/exe")"
  [ -f "$VS_STATE/dev/trunk/funk" ] || fail "trunk/funk is not in devfs: $(ls -R "$VS_STATE/dev")"
  [ -f "$VS_STATE/dev/vg0/lv0" ] || fail "vg0/lv0 is not in devfs: $(ls -R "$VS_STATE/dev")"
  vs status >"$T/status.up"
  head -n 1 "$T/status.up" | grep -qF "(daemon running, devfs $VS_STATE/dev, FUSE transport " ||
    fail "status does not show the daemon: $(cat "$T/status.up")"
  # The transport serving devfs (the ring where the kernel offered it at INIT, which depends
  # on a module parameter other tests may switch meanwhile).
  head -n 1 "$T/status.up" | grep -Eq "FUSE transport (uring|classic)" ||
    fail "status does not name the FUSE transport: $(head -n 1 "$T/status.up")"
  grep -qx "  pool trunk  ONLINE  .*" "$T/status.up" || fail "trunk not ONLINE: $(cat "$T/status.up")"
  grep -qx "    lv vg0/lv0  .*  active" "$T/status.up" || fail "vg0/lv0 not active: $(cat "$T/status.up")"
}

on_exit_stop_daemon
vs up
on_exit "umount -l $VS_STATE/dev"
assert_up
vs zfs list -H -p >"$T/zfs.daemon"
vs lvs --noheadings -o lv_name,vg_name,lv_size >"$T/lvs.daemon"
cmp "$T/zfs.offline" "$T/zfs.daemon" || fail "zfs list differs through the daemon"
cmp "$T/lvs.offline" "$T/lvs.daemon" || fail "lvs differs through the daemon"

# A second daemon for the same state dir is refused.
expect_fail vs daemon
grep -q "already running" "$T/expect_fail.err" || fail "second daemon: $(cat "$T/expect_fail.err")"

[ -f "$VS_STATE/dev/vg0/lv0" ] || fail "vg0/lv0 is not in devfs"
loop=$(vs losetup -f --show vg0/lv0)
on_exit_detach_loop "$loop"
[ "$(blockdev --getss "$loop")" = 4096 ] || fail "loop sector size is not the volume's 16K/4K block"
mkfs.xfs -q "$loop"
mkdir -p "$T/mnt"
mount "$loop" "$T/mnt"
on_exit_umount "$T/mnt"
for i in $(seq 1 20); do head -c $((i * 37 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f* >"$T/manifest")
sync

# 1. The daemon dies: nothing flushed may be lost.
kill -9 "$daemon_pid"
for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
umount -l "$T/mnt"
# A lazily unmounted XFS may still hold the loop device: detach is deferred until it lets
# go, and until then the old binding is still listed next to the one `up` makes.
losetup -d "$loop" || true
for _ in $(seq 100); do losetup "$loop" >/dev/null 2>&1 || break; sleep 0.1; done
losetup "$loop" >/dev/null 2>&1 && fail "$loop still bound after detach: $(losetup "$loop")"
umount -l "$VS_STATE/dev" || true
vs up
assert_up
loop2=$(vs losetup -a | awk -F: -v f="($VS_STATE/dev/vg0/lv0)" 'index($0, f) {print $1}')
[ -n "$loop2" ] || fail "up did not restore the loop binding: $(vs losetup -a)"
[ "$loop2" = "$loop" ] || echo "note: loop came back as $loop2 (was $loop)"
mount "$loop2" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest after kill -9 and up"

# 2. A clean down/up; down refuses while the LV is mounted.
expect_fail vs down
umount "$T/mnt"
vs down
[ ! -S "$VS_STATE/daemon.sock" ] || fail "socket still there after down"
losetup -a | grep -q "$VS_STATE" && fail "down left a loop device bound"
vs up
assert_up
loop3=$(vs losetup -a | awk -F: -v f="($VS_STATE/dev/vg0/lv0)" 'index($0, f) {print $1}')
[ -n "$loop3" ] || fail "loop binding not restored after down/up"
mount "$loop3" "$T/mnt"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest after down/up"
vs status >"$T/status"
grep -qF "loop $loop3  4096-byte sectors" "$T/status" || fail "status lacks the loop: $(cat "$T/status")"
grep -qF "mounted on $T/mnt (xfs)" "$T/status" || fail "status lacks the mount: $(cat "$T/status")"
umount "$T/mnt"
vs status >"$T/status"
grep -q "trunk/funk" "$T/status" || fail "status does not show trunk/funk"
grep -q "vg0/lv0" "$T/status" || fail "status does not show vg0/lv0"
vs status --json | python3 -c 'import json,sys; json.load(sys.stdin)' || fail "status --json"
vs down

# 4. A stale socket is replaced; a missing vdev leaves its pool unavailable, the rest comes up:
# `up` says what is missing and fails, yet the daemon runs and reports the pool UNAVAIL.
touch "$VS_STATE/daemon.sock"
mv "$T/trunk.img" "$T/trunk.moved"
expect_fail vs up
# up names the last thing that could not come up: the pool, or what stands on it.
grep -q "pool trunk is unavailable\|vg0/lv0 is not active" "$T/expect_fail.err" ||
  fail "up did not say what is missing: $(cat "$T/expect_fail.err")"
[ -S "$VS_STATE/daemon.sock" ] || fail "the stale socket file was not replaced by a socket"
daemon_pid=$(cat "$VS_STATE/daemon.pid")
kill -0 "$daemon_pid" 2>/dev/null || fail "no daemon running after up with a missing vdev"
vs status >"$T/status2" 2>"$T/status2.err"
head -n 1 "$T/status2" | grep -qF "(daemon running" || fail "status: no daemon: $(cat "$T/status2")"
grep -q "^  pool trunk  UNAVAIL" "$T/status2" || fail "missing vdev not reported: $(cat "$T/status2")"
[ ! -e "$VS_STATE/dev/trunk/funk" ] || fail "trunk/funk in devfs although its pool is missing"
vs down --force
for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$daemon_pid" 2>/dev/null && fail "daemon $daemon_pid still running after down"
# The vdev back: everything comes up again.
mv "$T/trunk.moved" "$T/trunk.img"
vs up
assert_up
vs down
echo "PASS"
