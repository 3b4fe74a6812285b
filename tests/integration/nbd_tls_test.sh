#!/bin/bash
# NBD over TCP is safe by default. Checks, with real clients (nbdinfo, nbdcopy, qemu-img):
#   1. a TCP listener without TLS is refused (one clear error, nothing left listening) unless
#      --tls=off is explicit; bad TLS settings are refused the same way;
#   2. PSK (psktool's key file): data round trip with nbdcopy and qemu-img; a plaintext
#      client and a wrong identity are refused by the default --tls=require;
#   3. X.509 (certificates made here with certtool): nbdinfo and qemu-img over TLS;
#   4. limits: 70 idle connections against --max-connections 64 --handshake-limit 3: a client
#      already served goes on, a new client is refused at once with a clear message (never
#      hangs), and once the idle ones have outlived the handshake limit a new client gets in.
# Every client runs under `timeout`.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd nbdinfo nbdcopy qemu-img psktool certtool python3 cmp

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# serve STATEDIR ARGS...: a standalone server in the background, killed at exit.
serve() {
  local st=$1
  shift
  vs --state-dir "$st" nbd serve "$@"
  on_exit_kill "$(cat "$st/nbd.pid")"
}
T10="timeout 10"
truncate -s 16M "$T/vol.img" "$T/vol2.img" "$T/vol3.img"
head -c 4M /dev/urandom >"$T/data"

# 1. Plaintext TCP only on request.
PORT=$(free_port)
expect_fail vs --state-dir "$T/s0" nbd serve --bind "127.0.0.1:$PORT" vol="$T/vol.img"
grep -q "needs TLS.*--tls=off" "$T/expect_fail.err" || fail "no clear refusal: $(cat "$T/expect_fail.err")"
[ "$(wc -l <"$T/expect_fail.err")" = 1 ] || fail "more than one error line: $(cat "$T/expect_fail.err")"
[ -e "$T/s0/nbd.pid" ] && fail "a refused server left a pid file"
$T10 nbdinfo "nbd://127.0.0.1:$PORT/vol" >/dev/null 2>&1 && fail "something listens on $PORT"
expect_fail vs --state-dir "$T/s0" nbd serve --tls=require --bind "127.0.0.1:$PORT" vol="$T/vol.img"
grep -q "needs --tls-psk" "$T/expect_fail.err" || fail "--tls=require alone: $(cat "$T/expect_fail.err")"
expect_fail vs --state-dir "$T/s0" nbd serve --tls=maybe --bind "127.0.0.1:$PORT" vol="$T/vol.img"
grep -q "expected off, on or require" "$T/expect_fail.err" || fail "--tls=maybe: $(cat "$T/expect_fail.err")"

# 2. PSK.
mkdir -p "$T/psk"
psktool -u alice -p "$T/psk/keys.psk" >/dev/null
psktool -u bob -p "$T/bob.psk" >/dev/null
PORT=$(free_port)
serve "$T/s1" --bind "127.0.0.1:$PORT" --tls-psk "$T/psk/keys.psk" vol="$T/vol.img"
PSK_URI="nbds://alice@127.0.0.1:$PORT/vol?tls-psk-file=$T/psk/keys.psk"
$T10 nbdinfo "$PSK_URI" >"$T/info" || fail "nbdinfo with PSK"
grep -q "with TLS" "$T/info" || fail "not TLS: $(cat "$T/info")"
$T10 nbdcopy --flush "$T/data" "$PSK_URI" || fail "nbdcopy in over TLS"
cmp -n 4194304 "$T/data" "$T/vol.img" || fail "data written over TLS differs"
$T10 nbdcopy "$PSK_URI" "$T/out" || fail "nbdcopy out over TLS"
cmp "$T/vol.img" "$T/out" || fail "data read over TLS differs"
QPSK=(--object "tls-creds-psk,id=tls0,endpoint=client,dir=$T/psk,username=alice")
QOPTS="driver=nbd,host=127.0.0.1,port=$PORT,export=vol,tls-creds=tls0"
$T10 qemu-img compare -q "${QPSK[@]}" --image-opts "driver=raw,file.driver=file,file.filename=$T/out" \
  "$QOPTS" || fail "qemu-img compare over TLS PSK"
if $T10 nbdinfo "nbd://127.0.0.1:$PORT/vol" >"$T/plain.out" 2>&1; then
  fail "a plaintext client was served by --tls=require"
fi
if $T10 qemu-img info "nbd://127.0.0.1:$PORT/vol" >"$T/plain.out" 2>&1; then
  fail "plaintext qemu-img was served"
fi
grep -q "requires TLS" "$T/plain.out" || fail "qemu-img did not see why: $(cat "$T/plain.out")"
if $T10 nbdinfo "nbds://bob@127.0.0.1:$PORT/vol?tls-psk-file=$T/bob.psk" >/dev/null 2>&1; then
  fail "an unknown PSK identity was served"
fi

# 3. X.509.
mkdir -p "$T/pki" "$T/client"
(
  cd "$T/pki"
  certtool --generate-privkey --key-type=ecdsa --outfile ca-key.pem
  printf 'cn = volstack test CA\nca\ncert_signing_key\nexpiration_days = 2\n' >ca.info
  certtool --generate-self-signed --load-privkey ca-key.pem --template ca.info --outfile ca-cert.pem
  certtool --generate-privkey --key-type=ecdsa --outfile server-key.pem
  printf 'cn = localhost\ndns_name = localhost\nip_address = 127.0.0.1\ntls_www_server\nsigning_key\nexpiration_days = 2\n' >server.info
  certtool --generate-certificate --load-ca-certificate ca-cert.pem --load-ca-privkey ca-key.pem \
    --load-privkey server-key.pem --template server.info --outfile server-cert.pem
) >/dev/null 2>&1 || fail "certtool"
cp "$T/pki/ca-cert.pem" "$T/client/"
PORT=$(free_port)
cp "$T/vol.img" "$T/vol2.img"
serve "$T/s2" --bind "127.0.0.1:$PORT" --tls-certificates "$T/pki" vol="$T/vol2.img"
X_URI="nbds://127.0.0.1:$PORT/vol?tls-certificates=$T/client"
$T10 nbdinfo "$X_URI" | grep -q "with TLS" || fail "nbdinfo with X.509"
$T10 nbdcopy "$X_URI" "$T/out2" && cmp "$T/vol.img" "$T/out2" || fail "nbdcopy over X.509"
$T10 qemu-img info --object "tls-creds-x509,id=tls0,endpoint=client,dir=$T/client" \
  --image-opts "driver=nbd,host=127.0.0.1,port=$PORT,export=vol,tls-creds=tls0" >"$T/qinfo" ||
  fail "qemu-img over X.509"
grep -q "16 MiB" "$T/qinfo" || fail "qemu-img info: $(cat "$T/qinfo")"
if $T10 nbdinfo "nbd://127.0.0.1:$PORT/vol" >/dev/null 2>&1; then
  fail "a plaintext client was served with X.509"
fi

# 4. Limits. A client in transmission (nbdcopy from a pipe that delivers late) must be served
# while 70 idle connections fill the server.
PORT=$(free_port)
serve "$T/s3" --bind "127.0.0.1:$PORT" --tls-psk "$T/psk/keys.psk" --handshake-limit 3 vol="$T/vol3.img"
PSK_URI="nbds://alice@127.0.0.1:$PORT/vol?tls-psk-file=$T/psk/keys.psk"
head -c 2M /dev/urandom >"$T/late"
(sleep 2; cat "$T/late") | LIBNBD_DEBUG=${LIBNBD_DEBUG:-0} timeout 30 nbdcopy -C 1 - "$PSK_URI" 2>"$T/copy.log" &
COPY=$!
sleep 1
python3 - "$PORT" "$T/idle.ready" "$T/idle.result" <<'PY' &
import socket, sys, time
port, ready, result = int(sys.argv[1]), sys.argv[2], sys.argv[3]
socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(70)]
open(ready, "w").close()
deadline = time.time() + 15
closed = 0
for s in socks:  # each must be closed by the server: refused, or past the handshake limit
    s.settimeout(max(0.1, deadline - time.time()))
    try:
        while s.recv(4096):
            pass
        closed += 1
    except OSError:
        pass
open(result, "w").write(str(closed))
PY
IDLE=$!
on_exit "kill $IDLE"
for _ in $(seq 50); do [ -e "$T/idle.ready" ] && break; sleep 0.1; done
[ -e "$T/idle.ready" ] || fail "idle connections not made"
start=$(date +%s%N)
if timeout 10 nbdinfo "$PSK_URI" >"$T/full.out" 2>&1; then
  fail "a 72nd client was served past --max-connections 64"
fi
ms=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt 5000 ] || fail "refusal at the limit took $ms ms"
# libnbd keeps the server's message to its debug log; qemu-img prints it.
if timeout 10 qemu-img info "${QPSK[@]}" --image-opts "driver=nbd,host=127.0.0.1,port=$PORT,export=vol,tls-creds=tls0" >"$T/full.out" 2>&1; then
  fail "qemu-img was served past --max-connections 64"
fi
grep -q "connection limit (64 clients)" "$T/full.out" || fail "refusal not clear: $(cat "$T/full.out")"
wait "$COPY" || fail "the client already served was not served at the limit: $(tail -40 "$T/copy.log")"
sleep 3  # the idle connections outlive --handshake-limit 3 and are dropped
timeout 10 nbdinfo "$PSK_URI" >/dev/null || fail "no client gets in after the handshake limit"
wait "$IDLE"
[ "$(cat "$T/idle.result")" = 70 ] || fail "only $(cat "$T/idle.result") of 70 idle connections closed"
timeout 10 nbdcopy "$PSK_URI" "$T/out3"
cmp -n 2097152 "$T/late" "$T/out3" || fail "data of the client served at the limit differs"
echo PASS
