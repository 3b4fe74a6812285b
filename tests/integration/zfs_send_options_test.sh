#!/bin/bash
# zfs send -c/-L/-v/-n --json, receive -s into a new name, receive -F of a full stream, with
# the CLI on file-backed pools (data written through devfs, then the daemon taken down):
#   1. send -c of an lz4 volume (12 MiB of text, 4 MiB of random bytes): the -c stream is
#      smaller than the plain one by about the volume's compressratio (within 15%); received
#      into B with compression=off it reads back identical (lvm-cat | cmp) and its
#      compressratio is the source's, while the plain stream received the same way stores
#      1.00x; -L changes no byte of the stream;
#   2. -v prints zfs's estimate line and, for a slow reader, the "TIME SENT SNAPSHOT"
#      header and HH:MM:SS lines; -v -v adds the BLOCKS column (-vvP: a tab-separated
#      count); -n --json prints one object with the exact size;
#   3. recv -s of a cut full stream into a new name: zfs list shows pb/new, zfs get gives
#      its receive_resume_token, zfs create of that name is refused, send -t resumes it to
#      a volume identical to the source; -A discards another, zfs destroy a third;
#   4. recv -F of a full stream into a volume with snapshots replaces it (only the stream's
#      snapshot left, the data the stream's); with a clone of one of its snapshots it is
#      refused and nothing changes; a stream of 4K blocks into that 16K-block volume: the
#      volume takes 4K, as zfs.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd python3 cmp
[ -e /dev/fuse ] || skip "needs /dev/fuse"

truncate -s 512M "$T/a.img" "$T/b.img"
vs zpool create pa "$T/a.img"
vs zpool create pb "$T/b.img"
vs zfs create -s -V 64M -o compression=lz4 pa/z
vs zfs create -s -V 16M -o volblocksize=4K pa/small  # for step 4's -F across volblocksizes

on_exit_stop_daemon
timeout 30 "$VOLSTACK" up >/dev/null
on_exit "umount -l $VS_STATE/dev"
python3 - "$T/text" <<'PY'
import random, sys
rng = random.Random(34)
words = [b"volume ", b"pool ", b"block ", b"pointer ", b"checksum ", b"txg ", b"zfs ", b"\n"]
out, n = [], 0
while n < 12 << 20:
    w = words[rng.randrange(len(words))]
    out.append(w)
    n += len(w)
open(sys.argv[1], "wb").write(b"".join(out)[: 12 << 20])
PY
dd if="$T/text" of="$VS_STATE/dev/pa/z" bs=1M conv=notrunc,fsync status=none
head -c $((4 << 20)) /dev/urandom >"$T/rand"
dd if="$T/rand" of="$VS_STATE/dev/pa/z" bs=1M seek=20 conv=notrunc,fsync status=none
dd if="$T/rand" of="$VS_STATE/dev/pa/small" bs=1M seek=2 count=3 conv=notrunc,fsync status=none
timeout 30 "$VOLSTACK" down >/dev/null
vs zfs snapshot pa/z@1 pa/small@s
vs zfs set snapdev=visible pa/z  # lvm-cat reads the snapshot as a device
vs zfs set snapdev=visible pa/small

# 1. -c against plain.
timeout 30 "$VOLSTACK" zfs send pa/z@1 >"$T/plain.stream"
timeout 30 "$VOLSTACK" zfs send -c pa/z@1 >"$T/c.stream"
timeout 30 "$VOLSTACK" zfs send -c -L pa/z@1 >"$T/cl.stream"
cmp -s "$T/c.stream" "$T/cl.stream" || fail "-L changed the stream"
plain=$(stat -c %s "$T/plain.stream")
comp=$(stat -c %s "$T/c.stream")
ratio=$(vs zfs get -H -p -o value refcompressratio pa/z@1)
python3 -c "
import sys
plain, comp, ratio = $plain, $comp, float('$ratio')
r = plain / comp
print(f'plain {plain} -c {comp}: {r:.2f}x, refcompressratio {ratio:.2f}x')
sys.exit(0 if ratio > 1.3 and abs(r - ratio) <= 0.15 * ratio else 1)
" || fail "-c stream not smaller by the compressratio"
timeout 30 "$VOLSTACK" zfs recv -o compression=off pb/c <"$T/c.stream"
timeout 30 "$VOLSTACK" zfs recv -o compression=off pb/plain <"$T/plain.stream"
cmp <(timeout 20 "$VOLSTACK" lvm-cat pb/c) <(timeout 20 "$VOLSTACK" lvm-cat pa/z@1) ||
  fail "the -c stream received differs"
want=$(vs zfs get -H -o value refcompressratio pa/z@1)
got=$(vs zfs get -H -o value compressratio pb/c)
[ "$got" = "$want" ] || fail "received -c compressratio $got, source $want"
[ "$(vs zfs get -H -o value compressratio pb/plain)" = 1.00x ] ||
  fail "plain stream into compression=off: $(vs zfs get -H -o value compressratio pb/plain)"

# 2. -v: the estimate, then the table (a reader that waits makes the send last > 1 s).
timeout 30 "$VOLSTACK" zfs send -v pa/z@1 2>"$T/v.err" | (sleep 2.5; cat >/dev/null) ||
  fail "send -v: $(cat "$T/v.err")"
grep -qE '^full send of pa/z@1 estimated size is [0-9.]+[KMG]$' "$T/v.err" || fail "-v: $(cat "$T/v.err")"
grep -qE '^total estimated size is ' "$T/v.err" || fail "-v total: $(cat "$T/v.err")"
grep -qE '^TIME        SENT   SNAPSHOT pa/z@1$' "$T/v.err" || fail "-v header: $(cat "$T/v.err")"
grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2}   +[0-9.]+[KMG]?   pa/z@1$' "$T/v.err" ||
  fail "-v progress: $(cat "$T/v.err")"
# -v -v: zfs's BLOCKS column (the data blocks sent so far), -P -v -v tab-separated.
timeout 30 "$VOLSTACK" zfs send -v -v pa/z@1 2>"$T/vv.err" | (sleep 2.5; cat >/dev/null) ||
  fail "send -v -v: $(cat "$T/vv.err")"
grep -qE '^TIME        SENT      BLOCKS    SNAPSHOT pa/z@1$' "$T/vv.err" ||
  fail "-v -v header: $(cat "$T/vv.err")"
grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2}   +[0-9.]+[KMG]?    +[0-9]+    pa/z@1$' "$T/vv.err" ||
  fail "-v -v progress: $(cat "$T/vv.err")"
timeout 30 "$VOLSTACK" zfs send -vvP pa/z@1 2>"$T/vvp.err" | (sleep 2.5; cat >/dev/null) ||
  fail "send -vvP: $(cat "$T/vvp.err")"
grep -qP '^\d\d:\d\d:\d\d\t\d+\t[1-9]\d*\tpa/z@1$' "$T/vvp.err" ||
  fail "-vvP progress: $(cat "$T/vvp.err")"
size=$(vs --json zfs send -n -c pa/z@1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["size"])')
[ "$size" = "$comp" ] || fail "-n --json size $size, the stream $comp"

# 3. recv -s into a new name, cut.
expect_fail timeout 20 "$VOLSTACK" zfs recv -s pb/new < <(head -c $((comp / 2)) "$T/c.stream")
grep -q "zfs send -t 1-" "$T/expect_fail.err" || fail "recv -s: $(cat "$T/expect_fail.err")"
vs zfs list -H -o name | grep -qx pb/new || fail "zfs list does not show pb/new: $(vs zfs list)"
token=$(vs zfs get -H -o value receive_resume_token pb/new)
[ "${token:0:2}" = "1-" ] || fail "no resume token for pb/new: $token"
expect_fail vs zfs create -s -V 64M pb/new
grep -q "already exists" "$T/expect_fail.err" || fail "create: $(cat "$T/expect_fail.err")"
timeout 30 "$VOLSTACK" zfs send -t "$token" | timeout 30 "$VOLSTACK" zfs recv -s pb/new ||
  fail "resume into pb/new"
cmp <(timeout 20 "$VOLSTACK" lvm-cat pb/new) <(timeout 20 "$VOLSTACK" lvm-cat pa/z@1) ||
  fail "the resumed pb/new differs"
[ "$(vs zfs get -H -o value compressratio pb/new)" = "$want" ] || fail "resumed -c not compressed"
expect_fail timeout 20 "$VOLSTACK" zfs recv -s pb/gone < <(head -c $((comp / 3)) "$T/c.stream")
vs zfs recv -A pb/gone
vs zfs list -H -o name | grep -qx pb/gone && fail "pb/gone listed after -A"
vs zfs create -s -V 16M pb/gone
expect_fail timeout 20 "$VOLSTACK" zfs recv -s pb/gone2 < <(head -c $((comp / 3)) "$T/c.stream")
vs zfs destroy pb/gone2
vs zfs list -H -o name | grep -qx pb/gone2 && fail "pb/gone2 listed after zfs destroy"
expect_fail vs zfs recv -A pb/gone2

# 4. recv -F of a full stream into a volume with snapshots.
vs zfs snapshot pb/plain@a
vs zfs snapshot pb/plain@b
vs zfs clone pb/plain@a pb/kid
before=$(vs zfs list -H -p -t all -o name,guid,referenced -r pb)
expect_fail vs zfs recv -F pb/plain <"$T/c.stream"
grep -q "dependent clones" "$T/expect_fail.err" || fail "-F with a clone: $(cat "$T/expect_fail.err")"
[ "$(vs zfs list -H -p -t all -o name,guid,referenced -r pb)" = "$before" ] ||
  fail "a refused -F changed pool B"
vs zfs destroy pb/kid
expect_fail vs zfs recv pb/plain <"$T/c.stream"
grep -q "must specify -F" "$T/expect_fail.err" || fail "no -F: $(cat "$T/expect_fail.err")"
timeout 30 "$VOLSTACK" zfs recv -F pb/plain <"$T/c.stream" || fail "recv -F of a full stream"
[ "$(vs zfs list -H -o name -t snapshot -r pb/plain | grep @)" = "pb/plain@1" ] ||
  fail "snapshots after -F: $(vs zfs list -H -o name -t snapshot -r pb/plain)"
cmp <(timeout 20 "$VOLSTACK" lvm-cat pb/plain) <(timeout 20 "$VOLSTACK" lvm-cat pa/z@1) ||
  fail "-F did not replace the contents"
# ... and a full stream of another volblocksize: the volume takes the stream's, as zfs.
timeout 30 "$VOLSTACK" zfs send pa/small@s | timeout 30 "$VOLSTACK" zfs recv -F pb/plain ||
  fail "recv -F of a 4K-block stream into a 16K-block volume"
[ "$(vs zfs get -H -o value volblocksize pb/plain)" = 4K ] ||
  fail "volblocksize after -F: $(vs zfs get -H -o value volblocksize pb/plain)"
[ "$(vs zfs list -H -o name -t snapshot -r pb/plain | grep @)" = "pb/plain@s" ] ||
  fail "snapshots after -F across volblocksizes: $(vs zfs list -H -o name -t snapshot -r pb/plain)"
cmp <(timeout 20 "$VOLSTACK" lvm-cat pb/plain) <(timeout 20 "$VOLSTACK" lvm-cat pa/small@s) ||
  fail "-F across volblocksizes did not replace the contents"
echo PASS
