#!/bin/bash
# The NBD server under bad input from raw sockets: garbage instead of the handshake, unknown
# client flags, unknown options (ERR_UNSUP, then the next option still works), oversized
# option data, a bad request magic, a client vanishing mid-WRITE, many connections dropped at
# once. After each, a real client (nbdinfo, qemu-img compare) still gets correct service,
# and the server's thread count returns to its idle level (no leak).
source "$(dirname "$0")/lib.sh"
need_root
need_cmd nbdinfo qemu-img python3

truncate -s 16M "$T/vol.img"
head -c 1M /dev/urandom | dd of="$T/vol.img" conv=notrunc status=none
vs nbd serve vol="$T/vol.img"
PID=$(cat "$VS_STATE/nbd.pid")
on_exit_kill "$PID"
SOCK=$VS_STATE/nbd.sock
threads() { ls "/proc/$PID/task" | wc -l; }
IDLE=$(threads)

python3 - "$SOCK" <<'PY' || fail "raw-socket checks"
import socket, struct, sys, time
path = sys.argv[1]
OPT = 0x49484156454F5054
REPLY = 0x3e889045565a9

def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(10)
    return s

def recv(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b

def greet(s, flags=3):
    hello = recv(s, 18)
    assert hello[:8] == b"NBDMAGIC" and struct.unpack(">Q", hello[8:16])[0] == OPT
    s.sendall(struct.pack(">I", flags))

def option(s, opt, data=b""):
    s.sendall(struct.pack(">QII", OPT, opt, len(data)) + data)
    while True:
        h = recv(s, 20)
        magic, o, typ, n = struct.unpack(">QIII", h)
        assert magic == REPLY and o == opt, (hex(magic), o)
        recv(s, n)
        if typ == 1 or typ & 0x80000000:
            return typ

def closed(s):
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True

# Garbage instead of client flags and options.
s = conn(); recv(s, 18); s.sendall(b"\xff" * 64); assert closed(s), "garbage"
# Unknown client flag bits.
s = conn(); greet(s, flags=0x80); assert closed(s), "unknown client flags"
# Unknown options get ERR_UNSUP and the next option still works.
s = conn(); greet(s)
assert option(s, 12345, b"abc") == 0x80000001
assert option(s, 5) == 0x80000002  # STARTTLS with TLS off: ERR_POLICY, as nbdkit
assert option(s, 3) == 1            # LIST
# Oversized option data: drained and refused with ERR_TOO_BIG.
assert option(s, 6, b"\0" * 100000) == 0x80000009
name = b"vol"
assert option(s, 7, struct.pack(">I", len(name)) + name + struct.pack(">H", 0)) == 1
# Transmission: a bad request magic ends the connection.
s.sendall(b"\x12\x34\x56\x78" + b"\0" * 24); assert closed(s), "bad request magic"
# A client vanishing mid-WRITE.
s = conn(); greet(s)
assert option(s, 7, struct.pack(">I", 3) + b"vol" + struct.pack(">H", 0)) == 1
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, 0, 65536) + b"x" * 1000)
s.close()
# Many clients dropped at once, some mid-handshake.
socks = [conn() for _ in range(20)]
for i, c in enumerate(socks):
    if i % 2: greet(c)
    c.close()
PY

qemu-img compare -q -f raw -F raw "$T/vol.img" "nbd+unix:///vol?socket=$SOCK" ||
  fail "service is wrong after bad input"
nbdinfo --size "nbd+unix:///vol?socket=$SOCK" | grep -qx $((16 << 20)) || fail "nbdinfo --size"
# Connection threads are reaped within a second or so.
for _ in $(seq 40); do [ "$(threads)" -le "$IDLE" ] && break; sleep 0.1; done
[ "$(threads)" -le "$IDLE" ] || fail "threads leaked: $(threads) > $IDLE"
[ "$(ls "/proc/$PID/fd" | wc -l)" -lt 20 ] || fail "fds leaked: $(ls "/proc/$PID/fd" | wc -l)"
echo PASS
