#!/bin/bash
# What TLS costs on volstack's NBD server, against nbdkit's in the same run: nbdcopy of
# SIZE (default 256M) of random data into and out of each server over 127.0.0.1, plaintext
# (--tls=off) and TLS with a PSK, interleaved for ROUNDS rounds (default 3). Prints the
# median milliseconds per case and the ratios nbdkit/volstack (> 1: volstack is faster).
#   bench/nbd_tls_compare.sh BUILD_DIR [SIZE] [ROUNDS]
set -euo pipefail
B=${1:?usage: nbd_tls_compare.sh BUILD_DIR [SIZE] [ROUNDS]}
SIZE=${2:-256M}
ROUNDS=${3:-3}
V=$(realpath "$B")/tools/volstack
for c in nbdkit nbdcopy psktool python3; do command -v $c >/dev/null || { echo "needs $c"; exit 1; }; done
W=$(mktemp -d /tmp/nbd-tls-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
psktool -u alice -p "$W/keys.psk" >/dev/null
head -c "$SIZE" /dev/urandom >"$W/src"
declare -A uri
for name in vs_plain vs_tls kit_plain kit_tls; do truncate -s "$SIZE" "$W/$name.img"; done
p=$(port); "$V" --state-dir "$W/s1" nbd serve --tls=off --bind "127.0.0.1:$p" d="$W/vs_plain.img"
pids+=("$(cat "$W/s1/nbd.pid")"); uri[vs_plain]="nbd://127.0.0.1:$p/d"
p=$(port); "$V" --state-dir "$W/s2" nbd serve --tls-psk "$W/keys.psk" --bind "127.0.0.1:$p" d="$W/vs_tls.img"
pids+=("$(cat "$W/s2/nbd.pid")"); uri[vs_tls]="nbds://alice@127.0.0.1:$p/d?tls-psk-file=$W/keys.psk"
p=$(port); nbdkit -f -p "$p" --tls=off file "$W/kit_plain.img" & pids+=("$!")
uri[kit_plain]="nbd://127.0.0.1:$p/"
p=$(port); nbdkit -f -p "$p" --tls=require --tls-psk="$W/keys.psk" file "$W/kit_tls.img" & pids+=("$!")
uri[kit_tls]="nbds://alice@127.0.0.1:$p/?tls-psk-file=$W/keys.psk"
sleep 1
declare -A ms
ms_of() { local s; s=$(date +%s%N); timeout 300 "$@" >/dev/null; echo $((($(date +%s%N) - s) / 1000000)); }
for ((r = 0; r < ROUNDS; r++)); do
  for name in vs_plain kit_plain vs_tls kit_tls; do
    ms[$name.write]+="$(ms_of nbdcopy "$W/src" "${uri[$name]}") "
    ms[$name.read]+="$(ms_of nbdcopy "${uri[$name]}" "$W/out") "
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "load: $(uptime | sed 's/.*load average: //')  size $SIZE  rounds $ROUNDS"
printf '%-10s %10s %10s\n' case write_ms read_ms
for name in vs_plain kit_plain vs_tls kit_tls; do
  printf '%-10s %10s %10s\n' "$name" "$(median <<<"${ms[$name.write]}")" "$(median <<<"${ms[$name.read]}")"
done
for mode in plain tls; do
  for op in write read; do
    awk -v k="$(median <<<"${ms[kit_$mode.$op]}")" -v v="$(median <<<"${ms[vs_$mode.$op]}")" \
      -v m="$mode" -v o="$op" 'BEGIN {printf "ratio nbdkit/volstack %s %s: %.2f\n", m, o, k / v}'
  done
done
