#!/bin/bash
# Each error says one clear thing (issue 37, item 7). Checks the exact messages:
#   1. a VG whose PV is a volume of a pool another process holds is reported busy, naming
#      the pool, not "not found" (and lvcreate changes nothing); once the pool is free,
#      lvcreate works;
#   2. `nbd serve` option errors are one line with one "nbd:" prefix, no errno text.
# The holder of the pool is a process holding flock on its vdev file (what a second volstack command
# holding the pool looks like), killed by PID at exit.
source "$(dirname "$0")/lib.sh"
need_cmd flock

truncate -s 128M "$T/a"
vs zpool create trunk "$T/a"
vs zfs create -V 32M trunk/v
vs pvcreate trunk/v >/dev/null
vs vgcreate vg trunk/v >/dev/null

# 1. The pool is busy: its VG is busy, not missing.
# One process holds the lock (fd 9, then exec): killing it frees the vdev.
(exec 9<"$T/a" && flock -x 9 && exec sleep 30) &
HOLDER=$!
on_exit_kill "$HOLDER"
for _ in $(seq 50); do
  flock -n -x "$T/a" true 2>/dev/null || break
  sleep 0.1
done
before=$(sha256sum <"$T/a")
expect_fail vs lvcreate -n lv1 -L 4M vg
grep -qx '  Volume group "vg" is busy: trunk/v, which may hold its PVs, is in use by another process' \
  "$T/expect_fail.err" || fail "busy VG: $(cat "$T/expect_fail.err")"
grep -q "not found" "$T/expect_fail.err" && fail "busy VG still said not found: $(cat "$T/expect_fail.err")"
[ "$(sha256sum <"$T/a")" = "$before" ] || fail "a refused lvcreate wrote to the pool"
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
vs lvcreate -n lv1 -L 4M vg >/dev/null || fail "lvcreate once the pool is free"
expect_fail vs lvcreate -n lv2 -L 4M nosuchvg
grep -qx '  Volume group "nosuchvg" not found' "$T/expect_fail.err" ||
  fail "missing VG: $(cat "$T/expect_fail.err")"

# 2. nbd serve option errors: one line, one prefix, no errno text.
expect_fail vs --state-dir "$T/s0" nbd serve --bind 127.0.0.1:1 --tls-verify-peer --tls=off x="$T/a"
[ "$(cat "$T/expect_fail.err")" = "volstack: nbd: --tls-verify-peer checks X.509 client certificates: it needs --tls-certificates DIR" ] ||
  fail "nbd serve error: $(cat "$T/expect_fail.err")"
expect_fail vs --state-dir "$T/s0" nbd serve --bind 127.0.0.1:1 x="$T/a"
[ "$(cat "$T/expect_fail.err")" = "volstack: nbd: a TCP listener needs TLS: give --tls-psk FILE or --tls-certificates DIR, or --tls=off to serve anyone who can reach the port in plaintext" ] ||
  fail "nbd serve error: $(cat "$T/expect_fail.err")"
echo PASS
