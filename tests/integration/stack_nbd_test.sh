#!/usr/bin/env bash
# NBD served by the daemon comes back with the stack. Pool `trunk` on a file, volume
# trunk/funk, a VG on volume trunk/pv with LV vg0/lv0; `volstack up`; then:
#   1. `nbd serve` through the daemon returns at once and prints its address: trunk/funk and
#      vg0/lv0 on a Unix socket, a file read-only on 127.0.0.1 (port 0: the real port is
#      recorded); nbdinfo lists the exports; nbdcopy writes random data (with --flush); a
#      file over TCP with TLS (PSK) and limits, all recorded (a plaintext client refused);
#   2. kill -9 the daemon, `up`: the listeners are back on the same addresses and the data
#      reads back identical (nbdcopy to a file + cmp, qemu-img compare);
#   3. clean down/up: the same;
#   4. busy: zfs destroy, zpool export, lvremove of a served device are refused and change
#      nothing; `nbd stop` releases it and is remembered over down/up;
#   5. without a daemon, `nbd list` shows the records as stopped; a hand-damaged nbd.json
#      gives an error naming the field, at `nbd list` and at `up`.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd nbdinfo nbdcopy qemu-img python3
[ -e /dev/fuse ] || skip "needs /dev/fuse"

truncate -s 1G "$T/trunk.img"
vs zpool create trunk "$T/trunk.img"
vs zfs create -V 64M trunk/funk
vs zfs create -V 64M trunk/pv
vs pvcreate trunk/pv >/dev/null
vs vgcreate vg0 trunk/pv >/dev/null
vs lvcreate -L 32M -n lv0 vg0 >/dev/null
head -c 8M /dev/urandom >"$T/plain.img"

on_exit_stop_daemon
vs up
on_exit "umount -l $VS_STATE/dev"
sock=$VS_STATE/nbd.sock
uri() { echo "nbd+unix:///$1?socket=$sock"; }

# 1. Serve through the daemon.
addr=$(vs nbd serve trunk/funk vg0/lv0)
[ "$addr" = "unix:$sock" ] || fail "nbd serve printed '$addr', not unix:$sock"
tcp=$(vs nbd serve --tls=off --bind 127.0.0.1:0 -r "$T/plain.img")
case "$tcp" in 127.0.0.1:[1-9]*) ;; *) fail "nbd serve --bind printed '$tcp'" ;; esac
grep -q "\"bind\": \"$tcp\"" "$VS_STATE/nbd.json" || fail "real port not recorded: $(cat "$VS_STATE/nbd.json")"
command -v psktool >/dev/null || skip "needs psktool (gnutls-bin)"
psktool -u alice -p "$T/keys.psk" >/dev/null
head -c 8M /dev/urandom >"$T/secret.img"
tls=$(vs nbd serve --bind 127.0.0.1:0 --tls-psk "$T/keys.psk" --max-connections 8 \
  --handshake-limit 5 -r "$T/secret.img")
python3 - "$VS_STATE/nbd.json" "$tls" "$T/keys.psk" <<'PY' || fail "TLS listener not recorded: $(cat "$VS_STATE/nbd.json")"
import json, sys
l = [l for l in json.load(open(sys.argv[1]))["listeners"] if l.get("bind") == sys.argv[2]][0]
assert l["tls"] == "require" and l["tls_psk"] == sys.argv[3], l
assert l["max_connections"] == 8 and l["handshake_limit"] == 5, l
PY
nbdinfo --list "nbd+unix:///?socket=$sock" >"$T/list"
grep -q "trunk/funk" "$T/list" && grep -q "vg0/lv0" "$T/list" || fail "exports not listed: $(cat "$T/list")"
expect_fail vs nbd serve trunk/funk
grep -q "already served" "$T/expect_fail.err" || fail "second listener on one socket: $(cat "$T/expect_fail.err")"
head -c 64M /dev/urandom >"$T/funk.data"
head -c 32M /dev/urandom >"$T/lv0.data"
nbdcopy --flush "$T/funk.data" "$(uri trunk/funk)"
nbdcopy --flush "$T/lv0.data" "$(uri vg0/lv0)"
vs nbd list >"$T/nbdlist"
grep -q "unix:$sock  *no  *serving  *trunk/funk,vg0/lv0" "$T/nbdlist" || fail "nbd list: $(cat "$T/nbdlist")"

check_data() {  # $1: when
  nbdinfo "$(uri trunk/funk)" >/dev/null || fail "$1: trunk/funk not served"
  nbdcopy "$(uri trunk/funk)" "$T/funk.back"
  cmp "$T/funk.data" "$T/funk.back" || fail "$1: trunk/funk data differs"
  qemu-img compare -q -f raw -F raw "$T/lv0.data" "$(uri vg0/lv0)" || fail "$1: vg0/lv0 data differs"
  nbdcopy "nbd://$tcp/plain.img" "$T/plain.back"
  cmp "$T/plain.img" "$T/plain.back" || fail "$1: TCP export differs"
  timeout 10 nbdcopy "nbds://alice@$tls/secret.img?tls-psk-file=$T/keys.psk" "$T/secret.back"
  cmp "$T/secret.img" "$T/secret.back" || fail "$1: TLS export differs"
  timeout 10 nbdinfo "nbd://$tls/secret.img" >/dev/null 2>&1 && fail "$1: TLS listener served plaintext"
  rm -f "$T/funk.back" "$T/plain.back" "$T/secret.back"
}
check_data "served"

# 2. kill -9, up.
daemon_pid=$(cat "$VS_STATE/daemon.pid")
kill -9 "$daemon_pid"
for _ in $(seq 50); do kill -0 "$daemon_pid" 2>/dev/null || break; sleep 0.1; done
umount -l "$VS_STATE/dev" || true
vs up
check_data "after kill -9 and up"

# 3. down/up.
vs down
[ -S "$sock" ] && fail "socket still there after down"
vs up
check_data "after down and up"

# 4. A served device is busy; refusals change nothing.
expect_fail vs zfs destroy trunk/funk
grep -q "dataset is busy.*NBD on unix:$sock" "$T/expect_fail.err" || fail "zfs destroy: $(cat "$T/expect_fail.err")"
expect_fail vs zpool export trunk
grep -q "pool is busy" "$T/expect_fail.err" || fail "zpool export: $(cat "$T/expect_fail.err")"
expect_fail vs lvremove -f vg0/lv0
grep -q "in use" "$T/expect_fail.err" || fail "lvremove: $(cat "$T/expect_fail.err")"
vs zfs list -H -o name | grep -qx trunk/funk || fail "trunk/funk gone after a refusal"
vs lvs --noheadings -o lv_name | grep -q lv0 || fail "lv0 gone after a refusal"
check_data "after the refusals"

vs nbd stop "$sock"
vs nbd list >"$T/nbdlist"
grep -q "$sock" "$T/nbdlist" && fail "stopped listener still listed: $(cat "$T/nbdlist")"
nbdinfo "$(uri trunk/funk)" >/dev/null 2>&1 && fail "stopped listener still answers"
expect_fail vs nbd stop "$sock"
vs down
vs up
[ -S "$sock" ] && fail "a stopped listener came back at up"
nbdinfo "nbd://$tcp/plain.img" >/dev/null || fail "the other listener did not come back"
vs lvremove -f vg0/lv0 >/dev/null || fail "lvremove after nbd stop"
vs down

# 5. No daemon: the records, and a damaged record.
vs nbd list >"$T/nbdlist"
grep -q "$tcp  *yes  *stopped" "$T/nbdlist" || fail "offline nbd list: $(cat "$T/nbdlist")"
cp "$VS_STATE/nbd.json" "$T/nbd.json.good"
python3 - "$VS_STATE/nbd.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["listeners"][0]["exports"][0]["name"] = "../etc"
json.dump(doc, open(sys.argv[1], "w"))
EOF
expect_fail vs nbd list
grep -q "nbd.json: listeners\[0\].exports\[0\].name: not a valid export name" "$T/expect_fail.err" ||
  fail "damaged nbd.json: $(cat "$T/expect_fail.err")"
printf '{"version": 1,\n "listeners": [\n' >"$VS_STATE/nbd.json"
expect_fail vs nbd list
grep -q "nbd.json: line 3" "$T/expect_fail.err" || fail "truncated nbd.json: $(cat "$T/expect_fail.err")"
# `up` says what is wrong and brings up the rest.
vs up 2>"$T/up.err" || true
grep -q "nbd.json: line 3" "$T/up.err" || fail "up with a damaged nbd.json: $(cat "$T/up.err")"
vs zfs list -H -o name | grep -qx trunk/funk || fail "the stack did not come up"
vs down --force
cp "$T/nbd.json.good" "$VS_STATE/nbd.json"
echo "PASS"
