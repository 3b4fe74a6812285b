#!/bin/bash
# `nbd serve --tls-verify-peer`: X.509 client certificates verified against the CA file
# (ca-cert.pem in --tls-certificates DIR), as nbdkit's --tls-verify-peer. Checks, with
# nbdinfo and nbdcopy over 127.0.0.1 and certificates made here with certtool:
#   1. bad settings are one clear error each, nothing left listening: --tls-verify-peer
#      with PSK, and with a certificates directory without ca-cert.pem;
#   2. a client whose certificate the CA signed is served: data round trip with nbdcopy;
#   3. a client with no certificate, and one whose certificate another CA signed, are
#      refused at the TLS handshake, each with one clear line in the server's log, and
#      neither reads a byte;
#   4. without --tls-verify-peer the same server setup serves a client without a
#      certificate (the option is what refuses it).
# Every client runs under `timeout`.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd nbdinfo nbdcopy certtool python3 cmp

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
serve() {
  local st=$1
  shift
  vs --state-dir "$st" nbd serve "$@"
  on_exit_kill "$(cat "$st/nbd.pid")"
}
T10="timeout 10"
truncate -s 16M "$T/vol.img" "$T/vol2.img"
head -c 4M /dev/urandom >"$T/data"

# A CA (signs the server and the good client), another CA (signs the bad client).
mkdir -p "$T/pki" "$T/good" "$T/bad" "$T/anon" "$T/other"
cert() {  # cert DIR NAME TEMPLATE-LINES CA-DIR: DIR/NAME-key.pem, DIR/NAME-cert.pem
  certtool --generate-privkey --key-type=ecdsa --outfile "$1/$2-key.pem"
  printf "$3" >"$1/$2.info"
  certtool --generate-certificate --load-ca-certificate "$4/ca-cert.pem" \
    --load-ca-privkey "$4/ca-key.pem" --load-privkey "$1/$2-key.pem" --template "$1/$2.info" \
    --outfile "$1/$2-cert.pem"
}
ca() {  # ca DIR NAME
  certtool --generate-privkey --key-type=ecdsa --outfile "$1/ca-key.pem"
  printf 'cn = %s\nca\ncert_signing_key\nexpiration_days = 2\n' "$2" >"$1/ca.info"
  certtool --generate-self-signed --load-privkey "$1/ca-key.pem" --template "$1/ca.info" \
    --outfile "$1/ca-cert.pem"
}
(
  ca "$T/pki" "volstack test CA"
  ca "$T/other" "another CA"
  cert "$T/pki" server 'cn = localhost\nip_address = 127.0.0.1\ntls_www_server\nsigning_key\nexpiration_days = 2\n' "$T/pki"
  cert "$T/good" client 'cn = good client\ntls_www_client\nsigning_key\nexpiration_days = 2\n' "$T/pki"
  cert "$T/bad" client 'cn = bad client\ntls_www_client\nsigning_key\nexpiration_days = 2\n' "$T/other"
) >/dev/null 2>&1 || fail "certtool"
for d in good bad anon; do cp "$T/pki/ca-cert.pem" "$T/$d/"; done

# 1. Bad settings.
PORT=$(free_port)
printf 'alice:0123456789abcdef\n' >"$T/keys.psk"
expect_fail vs --state-dir "$T/s0" nbd serve --bind "127.0.0.1:$PORT" --tls-psk "$T/keys.psk" \
  --tls-verify-peer vol="$T/vol.img"
[ "$(cat "$T/expect_fail.err")" = "volstack: nbd: --tls-verify-peer checks X.509 client certificates: it needs --tls-certificates DIR" ] ||
  fail "with PSK: $(cat "$T/expect_fail.err")"
mkdir -p "$T/noca"
cp "$T/pki/server-cert.pem" "$T/pki/server-key.pem" "$T/noca/"
expect_fail vs --state-dir "$T/s0" nbd serve --bind "127.0.0.1:$PORT" --tls-certificates "$T/noca" \
  --tls-verify-peer vol="$T/vol.img"
grep -q "needs $T/noca/ca-cert.pem (the CA that signs the clients' certificates)" "$T/expect_fail.err" ||
  fail "without ca-cert.pem: $(cat "$T/expect_fail.err")"
[ "$(wc -l <"$T/expect_fail.err")" = 1 ] || fail "more than one error line: $(cat "$T/expect_fail.err")"
[ -e "$T/s0/nbd.pid" ] && fail "a refused server left a pid file"

# 2. The CA's client is served.
serve "$T/s1" --bind "127.0.0.1:$PORT" --tls-certificates "$T/pki" --tls-verify-peer vol="$T/vol.img"
uri() { echo "nbds://127.0.0.1:$PORT/vol?tls-certificates=$T/$1"; }
$T10 nbdinfo "$(uri good)" >"$T/info" || fail "nbdinfo with the CA's client certificate"
grep -q "with TLS" "$T/info" || fail "not TLS: $(cat "$T/info")"
$T10 nbdcopy --flush "$T/data" "$(uri good)" || fail "nbdcopy in"
$T10 nbdcopy "$(uri good)" "$T/out" || fail "nbdcopy out"
cmp -n 4194304 "$T/data" "$T/out" || fail "data differs"
cmp "$T/vol.img" "$T/out" || fail "data on the volume differs"

# 3. No certificate, another CA's certificate: refused, one log line each.
log="$T/s1/nbd.log"
: >"$log"
if $T10 nbdcopy "$(uri anon)" "$T/out.anon" 2>"$T/anon.err"; then
  fail "a client without a certificate was served"
fi
[ -s "$T/out.anon" ] && fail "a client without a certificate read data"
for _ in $(seq 20); do [ -s "$log" ] && break; sleep 0.1; done
grep -qx "volstack: nbd: client 127.0.0.1:[0-9]*: client refused: it sent no TLS certificate signed by ca-cert.pem (--tls-verify-peer)" "$log" ||
  fail "no clear log line for a client without a certificate: $(cat "$log")"
[ "$(wc -l <"$log")" = 1 ] || fail "more than one log line: $(cat "$log")"
: >"$log"
if $T10 nbdcopy "$(uri bad)" "$T/out.bad" 2>"$T/bad.err"; then
  fail "a client with another CA's certificate was served"
fi
[ -s "$T/out.bad" ] && fail "a client with another CA's certificate read data"
for _ in $(seq 20); do [ -s "$log" ] && break; sleep 0.1; done
# (GnuTLS clients send only a certificate of a CA the server names, so this one sends none.)
grep -qxE "volstack: nbd: client 127.0.0.1:[0-9]*: client refused: (it sent no TLS certificate signed by ca-cert.pem \(--tls-verify-peer\)|its TLS certificate is not signed by ca-cert.pem \(.*\))" "$log" ||
  fail "no clear log line for another CA's client: $(cat "$log")"
[ "$(wc -l <"$log")" = 1 ] || fail "more than one log line: $(cat "$log")"
$T10 nbdinfo "$(uri good)" >/dev/null || fail "the good client is no longer served"

# 4. Without the option, a client without a certificate is served.
PORT2=$(free_port)
serve "$T/s2" --bind "127.0.0.1:$PORT2" --tls-certificates "$T/pki" vol="$T/vol2.img"
$T10 nbdinfo "nbds://127.0.0.1:$PORT2/vol?tls-certificates=$T/anon" >/dev/null ||
  fail "without --tls-verify-peer a client without a certificate was refused"
echo PASS
