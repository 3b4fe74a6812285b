#!/bin/bash
# volstack's NBD server against real clients: nbdinfo (size, block sizes, flags, contexts,
# --map), nbdcopy both ways over several connections with cmp, qemu-img info/convert/compare,
# qemu-io patterns (write, zero, discard, FUA, flush), fio's nbd engine with verification,
# a TCP listener on 127.0.0.1, a read-only export, and a clean stop.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd nbdinfo nbdcopy qemu-img qemu-io python3 cmp

# A source image: data at 1 MiB and 20 MiB, holes elsewhere.
truncate -s 64M "$T/src.img"
head -c 3M /dev/urandom | dd of="$T/src.img" bs=1M seek=1 conv=notrunc status=none
head -c 1M /dev/urandom | dd of="$T/src.img" bs=1M seek=20 conv=notrunc status=none
truncate -s 64M "$T/vol.img"
truncate -s 16M "$T/ro.img"
vs nbd serve vol="$T/vol.img"
on_exit_kill "$(cat "$VS_STATE/nbd.pid")"
SOCK=$VS_STATE/nbd.sock
URI="nbd+unix:///vol?socket=$SOCK"
[ -S "$SOCK" ] || fail "no socket at $SOCK"

nbdinfo --json "$URI" >"$T/info.json"
python3 - "$T/info.json" <<'PY' || fail "nbdinfo: $(cat "$T/info.json")"
import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
assert e["export-name"] == "vol"
assert e["export-size"] == 64 << 20
assert e["block_size_minimum"] == 512 and e["block_size_preferred"] == 4096
assert e["block_size_maximum"] == 32 << 20
for f in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn", "can_fast_zero"):
    assert e[f], f
assert not e["is_read_only"]
assert "base:allocation" in e["contexts"]
PY
nbdinfo --list --json "nbd+unix:///?socket=$SOCK" | grep -q '"export-name": "vol"' || fail "nbdinfo --list"

# nbdcopy in and out, 4 connections (multi-conn), then compare.
nbdcopy -C 4 -R 16 "$T/src.img" "$URI" || fail "nbdcopy to the server"
cmp "$T/src.img" "$T/vol.img" || fail "backing file differs after nbdcopy in"
nbdcopy -C 4 "$URI" "$T/out.img" || fail "nbdcopy from the server"
cmp "$T/src.img" "$T/out.img" || fail "nbdcopy out differs"
# The map shows the holes nbdcopy left (it skips zeroes) and the data.
nbdinfo --map "$URI" >"$T/map"
grep -q '^ *1048576 *3145728 *0 *data' "$T/map" || fail "map: $(cat "$T/map")"
grep -q 'hole,zero' "$T/map" || fail "map has no holes: $(cat "$T/map")"

qemu-img info -f raw "$URI" | grep -q 'virtual size: 64 MiB' || fail "qemu-img info"
qemu-img compare -q -f raw -F raw "$T/src.img" "$URI" || fail "qemu-img compare"
head -c 64M /dev/urandom >"$T/rand.img"
qemu-img convert -n -f raw -O raw "$T/rand.img" "$URI" || fail "qemu-img convert"
qemu-img compare -q -f raw -F raw "$T/rand.img" "$URI" || fail "compare after convert"

# qemu-io patterns; a failed verification prints "Pattern verification failed".
qemu-io -f raw \
  -c 'write -P 0xab 1M 64k' -c 'read -P 0xab 1M 64k' \
  -c 'write -f -P 0xcd 3M 4k' -c 'read -P 0xcd 3M 4k' \
  -c 'write -z 2M 1M' -c 'read -P 0 2M 1M' \
  -c 'write -z -u 5M 1M' -c 'read -P 0 5M 1M' \
  -c 'discard 8M 1M' -c 'flush' \
  -c 'aio_write -P 0x11 10M 128k' -c 'aio_flush' -c 'read -P 0x11 10M 128k' \
  "$URI" >"$T/qemu-io.out" 2>&1 || fail "qemu-io: $(cat "$T/qemu-io.out")"
grep -qi 'fail' "$T/qemu-io.out" && fail "qemu-io: $(cat "$T/qemu-io.out")"
cmp -n 65536 <(head -c 65536 /dev/zero | tr '\0' '\253') \
  <(dd if="$T/vol.img" bs=1M skip=1 count=1 status=none) || fail "0xab not in the backing file"
# Past the end: an error, not a crash; the server goes on.
qemu-io -f raw -c 'read 64M 4k' "$URI" >"$T/eof.out" 2>&1 || true
grep -qi 'error\|failed' "$T/eof.out" || fail "read past the end succeeded: $(cat "$T/eof.out")"

if fio --enghelp=nbd >/dev/null 2>&1; then
  fio --name=verify --ioengine=nbd --uri="$URI" --rw=randwrite --bs=4k --iodepth=16 \
    --size=16M --verify=crc32c --do_verify=1 --verify_state_save=0 --output="$T/fio.out" >/dev/null 2>&1 ||
    fail "fio nbd verify: $(cat "$T/fio.out")"
  grep -q 'err= 0' "$T/fio.out" || fail "fio reported errors"
fi

# TCP on 127.0.0.1 and a read-only export.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
vs --state-dir "$T/state2" nbd serve -r --tls=off --bind "127.0.0.1:$PORT" ro="$T/ro.img"
on_exit_kill "$(cat "$T/state2/nbd.pid")"
nbdinfo --is read-only "nbd://127.0.0.1:$PORT/ro" || fail "-r export is not read-only"
qemu-io -f raw -c 'write 0 4k' "nbd://127.0.0.1:$PORT/ro" >"$T/ro.out" 2>&1 || true
grep -qi 'denied\|not permitted\|read-only\|failed' "$T/ro.out" || fail "write to -r export: $(cat "$T/ro.out")"
kill "$(cat "$T/state2/nbd.pid")"

# Clean stop.
PID=$(cat "$VS_STATE/nbd.pid")
kill "$PID"
for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PID" 2>/dev/null && fail "server did not stop"
[ -e "$SOCK" ] && fail "socket left behind"
echo PASS
