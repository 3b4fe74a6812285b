#!/bin/bash
# A pool whose vdev is a remote NBD export (remote/nbd_client_device.h): nbdkit's memory
# plugin on a Unix socket stands for the other host. `zpool create p nbd+unix:///?socket=S`,
# a volume, data written through an NBD export of that volume (nbdcopy), `zpool export`,
# `zpool import -d URI`, the data reads back identical (cmp). A URI whose server is gone
# gives one error naming it. A PV on a second export carries a VG and an LV. Every client and
# server runs under `timeout`. Last, a pool on volstack's own NBD server over TCP with TLS
# (nbds:// with a PSK file).
source "$(dirname "$0")/lib.sh"
need_root
need_cmd nbdkit nbdcopy nbdinfo cmp psktool python3

S=$T/remote.sock
timeout 120 nbdkit -f -U "$S" -P "$T/nbdkit.pid" memory 512M &
NBDKIT=$!
on_exit_kill "$NBDKIT"
wait_for_nbd_socket "$S"
URI="nbd+unix:///?socket=$S"

timeout 30 "$VOLSTACK" zpool create rp "$URI" || fail "zpool create on $URI"
vs zpool status rp | grep -qF "$URI" || fail "status does not show the NBD vdev: $(vs zpool status rp)"
vs zfs create -V 32M rp/vol
head -c 32M /dev/urandom >"$T/data"

# Writes and reads through the volume, served over a local socket by a standalone server.
copy() {  # copy SRC DST: through `nbd serve` of rp/vol
  vs --state-dir "$VS_STATE" nbd serve --socket "$T/vol.sock" rp/vol
  local pid
  pid=$(cat "$VS_STATE/nbd.pid")
  on_exit_kill "$pid"
  timeout 30 nbdcopy --flush "$1" "$2" || fail "nbdcopy $1 -> $2"
  kill "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && fail "nbd server did not stop"
  return 0
}
copy "$T/data" "nbd+unix:///rp/vol?socket=$T/vol.sock"

timeout 30 "$VOLSTACK" zpool export rp || fail "zpool export"
vs zpool list -H -o name | grep -qx rp && fail "rp still listed after export"
timeout 30 "$VOLSTACK" zpool import -d "$URI" >"$T/import.list" || fail "import listing"
grep -q "pool: rp" "$T/import.list" || fail "rp not found on $URI: $(cat "$T/import.list")"
timeout 30 "$VOLSTACK" zpool import -d "$URI" rp || fail "zpool import -d $URI rp"
copy "nbd+unix:///rp/vol?socket=$T/vol.sock" "$T/back"
cmp "$T/data" "$T/back" || fail "data read back from the NBD vdev differs"

# A vdev whose server is gone: one clear error naming it, nothing created.
expect_fail timeout 30 "$VOLSTACK" zpool create rq "nbd+unix:///?socket=$T/none.sock"
grep -q "none.sock" "$T/expect_fail.err" || fail "missing server: $(cat "$T/expect_fail.err")"
vs zpool list -H -o name | grep -qx rq && fail "rq created without its vdev"
# A PV on another export: pvcreate, vgcreate, lvcreate through the same resolver.
S2=$T/pv.sock
timeout 120 nbdkit -f -U "$S2" memory 128M &
on_exit_kill "$!"
wait_for_nbd_socket "$S2"
PV="nbd+unix:///?socket=$S2"
timeout 30 "$VOLSTACK" pvcreate "$PV" >/dev/null || fail "pvcreate $PV"
timeout 30 "$VOLSTACK" vgcreate rvg "$PV" >/dev/null || fail "vgcreate on $PV"
timeout 30 "$VOLSTACK" lvcreate -L 16M -n lv0 rvg >/dev/null || fail "lvcreate on the NBD PV"
vs lvs --noheadings -o lv_name,vg_name | grep -q "lv0 *rvg" || fail "lv0 not listed: $(vs lvs)"
# A vdev over TLS: volstack's own server on 127.0.0.1 with a PSK, the pool on nbds://.
psktool -u alice -p "$T/keys.psk" >/dev/null
truncate -s 256M "$T/far.img"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
vs --state-dir "$T/far" nbd serve --tls-psk "$T/keys.psk" --bind "127.0.0.1:$PORT" d="$T/far.img"
on_exit_kill "$(cat "$T/far/nbd.pid")"
FAR="nbds://alice@127.0.0.1:$PORT/d?tls-psk-file=$T/keys.psk"
timeout 30 "$VOLSTACK" zpool create tp "$FAR" || fail "zpool create over TLS"
vs zpool list -H -o name,health | grep -qx $'tp\tONLINE' || fail "tp: $(vs zpool list)"
timeout 30 "$VOLSTACK" zpool export tp || fail "zpool export tp"
echo PASS
