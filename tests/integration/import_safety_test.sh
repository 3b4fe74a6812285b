#!/bin/bash
# Nothing is written to a device before every check has passed, and import never silently
# discards a committed txg. Device bytes are compared before and after (sha256sum):
#   - a cached pool's vdev replaced by another (exported) pool's vdev: commands refuse it
#     and the other pool's labels are not rewritten;
#   - `zpool create` with a state dir it cannot use (a file, an unwritable place) writes no
#     label;
#   - the newest MOS block damaged: every command refuses the pool, saying how many
#     txgs would be lost, and writes nothing; `zpool import -F -n` says what a rewind would
#     discard and writes nothing; `zpool import -F` rewinds and says what it discarded;
#   - the newest 1, 2 and 3 MOS blocks damaged, each txg written by a command of its own:
#     `zpool import -F` rewinds to the txg before each (the older trees were kept).
source "$(dirname "$0")/lib.sh"

sum() { sha256sum <"$1" | cut -d' ' -f1; }

# --- another pool's vdev in place of ours
truncate -s 64M "$T/a" "$T/b"
vs zpool create alpha "$T/a"
vs zpool create beta "$T/b"
vs zpool export beta
cp --sparse=always "$T/b" "$T/a"
before=$(sum "$T/a")
expect_fail vs zfs create -V 8M alpha/x
grep -q "now holds another pool ('beta')" "$T/expect_fail.err" || fail "no clear error: $(cat "$T/expect_fail.err")"
vs zpool status alpha >"$T/status" 2>&1 || true
grep -q UNAVAIL "$T/status" || fail "alpha not shown UNAVAIL: $(cat "$T/status")"
[ "$(sum "$T/a")" = "$before" ] || fail "the other pool's vdev was written"
vs zpool export alpha 2>/dev/null  # forgotten: its vdev is not its own any more
[ "$(sum "$T/a")" = "$before" ] || fail "export wrote to the other pool's vdev"

# --- a state dir zpool create cannot use
truncate -s 64M "$T/c"
before=$(sum "$T/c")
echo x >"$T/not-a-dir"
expect_fail vs --state-dir "$T/not-a-dir" zpool create gamma "$T/c"
[ "$(sum "$T/c")" = "$before" ] || fail "a label was written with a state dir that is a file"
expect_fail vs --state-dir /proc/volstack-no-such-dir zpool create gamma "$T/c"
[ "$(sum "$T/c")" = "$before" ] || fail "a label was written with an unwritable state dir"
[ "$(wc -l <"$T/expect_fail.err")" = 1 ] || fail "more than one error line: $(cat "$T/expect_fail.err")"

# --- the newest txgs damaged
vs zpool create delta "$T/c"
vs zfs create -s -V 16M delta/v
vs zfs set user:step=1 delta/v
t1=$(vs zpool list -Hp -o txg delta)
vs zfs set user:step=2 delta/v
vs zfs set user:step=3 delta/v
t3=$(vs zpool list -Hp -o txg delta)
[ "$t3" = $((t1 + 2)) ] || skip "each property change was expected to be one txg ($t1 -> $t3)"
# damage_mos IMAGE TXG: garbles the MOS of TXG (rootbp's DVA 0 offset, in uberblock slot
# TXG mod 32 of label 0).
damage_mos() {
  local slot=$((131072 + ($2 % 32) * 4096))
  local mos
  mos=$(od -An -t u8 -j $((slot + 56)) -N 8 "$1" | tr -d ' ')
  printf '\xff\xff\xff\xff' | dd of="$1" bs=1 seek=$((mos + 200)) conv=notrunc status=none
}
damage_mos "$T/c" "$t3"
before=$(sum "$T/c")
vs zpool status delta >"$T/status" 2>&1 || true
grep -q "would discard 1 committed txg(s)" "$T/status" || fail "status does not say what is lost: $(cat "$T/status")"
expect_fail vs zfs set user:step=4 delta/v
grep -q "zpool import -F" "$T/expect_fail.err" || fail "no rewind advice: $(cat "$T/expect_fail.err")"
[ "$(sum "$T/c")" = "$before" ] || fail "a refused pool was written"
vs zpool export delta 2>/dev/null
expect_fail vs zpool import -f -d "$T/c" delta
grep -q "would discard 1 committed txg(s) (txg $t3," "$T/expect_fail.err" ||
  fail "import does not say what would be lost: $(cat "$T/expect_fail.err")"
vs zpool import -f -F -n -d "$T/c" delta >"$T/dry"
grep -q "Would discard approximately [0-9]* seconds of transactions (txg $t3)" "$T/dry" ||
  fail "dry run: $(cat "$T/dry")"
[ "$(sum "$T/c")" = "$before" ] || fail "import -F -n wrote"
vs zpool list -H -o name | grep -qx delta && fail "import -F -n imported the pool"
vs zpool import -f -F -d "$T/c" delta >"$T/rewound"
grep -q "Discarded approximately" "$T/rewound" || fail "rewind not reported: $(cat "$T/rewound")"
[ "$(vs zfs get -H -o value user:step delta/v)" = 2 ] || fail "not rewound to the txg before the damage"
vs zpool status delta | grep -q "state: ONLINE" || fail "rewound pool not ONLINE"

# --- several txgs, each written by a command of its own (a fresh import each): the older
# txgs' trees are kept (deferred frees stored with the MOS), so -F rewinds to each of the
# three before the newest.
truncate -s 64M "$T/e"
vs zpool create eps "$T/e"
vs zfs create -s -V 16M eps/v
declare -a txg
for i in 1 2 3 4; do
  vs zfs set user:step=$i eps/v
  txg[i]=$(vs zpool list -Hp -o txg eps)
done
[ "${txg[4]}" = $((txg[1] + 3)) ] || skip "each property change was expected to be one txg (${txg[*]})"
vs zpool export eps
cp --sparse=always "$T/e" "$T/e.orig"
for back in 1 2 3; do
  cp --sparse=always "$T/e.orig" "$T/e"
  for k in $(seq 0 $((back - 1))); do damage_mos "$T/e" "${txg[4 - k]}"; done
  expect_fail vs zpool import -d "$T/e" eps
  grep -q "would discard $back committed txg(s)" "$T/expect_fail.err" ||
    fail "rewind $back: not refused as it should: $(cat "$T/expect_fail.err")"
  vs zpool import -F -d "$T/e" eps >"$T/rewound" || fail "rewind $back: import -F failed"
  [ "$(vs zfs get -H -o value user:step eps/v)" = $((4 - back)) ] ||
    fail "rewind $back: not the txg before the damage: $(vs zfs get -H -o value user:step eps/v)"
  vs zpool export eps
done
echo PASS
