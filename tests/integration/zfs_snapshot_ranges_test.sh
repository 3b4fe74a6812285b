#!/bin/bash
# zfs destroy of snapshot lists and ranges, zfs list's sort keys, written@ and the
# reservation and logical space columns, through the daemon (data written through devfs):
#   1. five snapshots with known unique space: @a holds 4 MiB alone, @b and @c 2 MiB each
#      alone and 2 MiB together, @d 4 MiB, @e nothing;
#   2. zfs list -s/-S keys apply in command-line order (-s used -S name != -S name -s used);
#      zfs list -t snapshot VOL lists the snapshots of VOL (not VOL), as zfs does;
#   3. destroy -nv / -nvp of a range: the snapshots it names and the space destroying them
#      together frees (more than the sum of their `used`); nothing destroyed;
#   4. a range with a held snapshot, or one with a clone (without -R), a reversed or
#      unknown range, and bad names: one error, zfs's exit code, nothing destroyed;
#   5. destroy -v of a range, then of a list with a name that matches nothing (skipped, as
#      zfs does), then -R of the whole range "%" (the clone with it);
#   6. written@ of a snapshot outside the lineage is "-" with source "-" (as zfs get prints
#      it); refreservation, usedbyrefreservation and logicalreferenced agree with the data
#      in zfs list -o and zfs get.
source "$(dirname "$0")/lib.sh"
need_root
[ -e /dev/fuse ] || skip "needs /dev/fuse"

truncate -s 512M "$T/rg.img"
vs zpool create rg "$T/rg.img"
vs zfs create -s -b 4K -V 32M rg/vol
vs zfs create -b 4K -V 8M rg/thick
on_exit_stop_daemon
timeout 30 "$VOLSTACK" up
on_exit "umount -l $VS_STATE/dev"
DEV=$VS_STATE/dev
z() { timeout 20 "$VOLSTACK" zfs "$@"; }
w() { # volume MiB-offset MiB-count
  timeout 20 dd if=/dev/urandom of="$DEV/$1" bs=1M seek="$2" count="$3" oflag=direct \
    conv=notrunc,fsync status=none || fail "write $1"
}
M=$((1024 * 1024))

# 1. Known unique space (the snapshot commits the writes before it).
w rg/vol 0 8 && z snapshot rg/vol@a
w rg/vol 0 4 && z snapshot rg/vol@b
w rg/vol 0 2 && z snapshot rg/vol@c
w rg/vol 0 4 && z snapshot rg/vol@d
w rg/vol 0 4 && z snapshot rg/vol@e
used() { z list -Hp -o used "rg/vol@$1"; }
near() { # value want: at least want, plus at most the indirect blocks above it (with 4 KiB
  # blocks a 16 KiB L1 per 512 KiB, and the path to the root)
  [ "$1" -ge "$2" ] && [ "$1" -le $(($2 + $2 / 32 + 65536)) ]
}
for s in a:4 b:2 c:2 d:4 e:0; do
  near "$(used "${s%:*}")" $((${s#*:} * M)) || fail "used of @${s%:*}: $(used "${s%:*}")"
done

# 2. Sort keys in the order given.
order() { z list -H -t snapshot -o name "$@" rg/vol | sed 's/.*@//' | tr -d '\n'; }
[ "$(order -s used -S name)" = ecbda ] || fail "-s used -S name: $(order -s used -S name)"
[ "$(order -S name -s used)" = edcba ] || fail "-S name -s used: $(order -S name -s used)"
[ "$(order -S used -s name)" = adbce ] || fail "-S used -s name: $(order -S used -s name)"

# 3. Dry runs.
before=$(z list -H -t all -o name)
z destroy -nv rg/vol@b%c >"$T/dry"
printf 'would destroy rg/vol@b\nwould destroy rg/vol@c\n' | cmp -s - <(head -2 "$T/dry") ||
  fail "dry run: $(cat "$T/dry")"
grep -q "^would reclaim 6" "$T/dry" || fail "dry run reclaim: $(cat "$T/dry")"
z destroy -nvp rg/vol@b%c >"$T/dryp"
reclaim=$(awk -F'\t' '$1 == "reclaim" {print $2}' "$T/dryp")
near "$reclaim" $((6 * M)) || fail "reclaim of @b%c: $reclaim"
[ "$reclaim" -gt $(($(used b) + $(used c))) ] || fail "reclaim $reclaim is only the sum of used"
[ "$(grep -c '^destroy	rg/vol@[bc]$' "$T/dryp")" = 2 ] || fail "-p lines: $(cat "$T/dryp")"
z destroy -nv rg/vol@%b | grep -c "would destroy" | grep -qx 2 || fail "@%b is not @a,@b"
z destroy -nv rg/vol@d% | grep -c "would destroy" | grep -qx 2 || fail "@d% is not @d,@e"
[ "$(z list -H -t all -o name)" = "$before" ] || fail "a dry run destroyed"

# 4. Refused, nothing destroyed.
expect_code() { # code command...
  local want=$1 rc=0
  shift
  "$@" >/dev/null 2>"$T/err" || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, want $want: $(cat "$T/err")"
  [ "$(grep -c . "$T/err")" -ge 1 ] || fail "$*: no error message"
  [ "$(z list -H -t all -o name)" = "$before" ] || fail "$*: destroyed something"
}
z hold keep rg/vol@c
expect_code 1 z destroy rg/vol@b%d
grep -q "busy" "$T/err" || fail "held: $(cat "$T/err")"
z release keep rg/vol@c
z clone rg/vol@d rg/cl
before=$(z list -H -t all -o name)
expect_code 1 z destroy rg/vol@c%
grep -q "dependent clones" "$T/err" || fail "clone: $(cat "$T/err")"
# -R destroys the clone in txgs of its own: a hold elsewhere in the range must refuse first.
z hold keep rg/vol@e
expect_code 1 z destroy -R rg/vol@c%
grep -q "busy" "$T/err" || fail "-R with a hold: $(cat "$T/err")"
z release keep rg/vol@e
expect_code 1 z destroy rg/vol@d%b
grep -q "could not find any snapshots" "$T/err" || fail "reversed: $(cat "$T/err")"
expect_code 1 z destroy rg/vol@nope%c
expect_code 1 z destroy rg/vol@x,y
expect_code 2 z destroy 'rg/vol@b%%c'
expect_code 2 z destroy 'rg/vol@b%c@d'
expect_code 2 z destroy 'rg/vol@'
expect_code 2 z destroy 'rg@a'

# 5. Ranges and lists, for real.
z destroy -v rg/vol@b%c >"$T/out"
grep -qx "will destroy rg/vol@c" "$T/out" || fail "-v: $(cat "$T/out")"
[ "$(z list -H -t snapshot -o name rg/vol | tr '\n' ' ')" = "rg/vol@a rg/vol@d rg/vol@e " ] ||
  fail "after @b%c: $(z list -H -t snapshot -o name rg/vol)"
z destroy rg/vol@nope,a
[ "$(z list -H -t snapshot -o name rg/vol | tr '\n' ' ')" = "rg/vol@d rg/vol@e " ] ||
  fail "after @nope,a: $(z list -H -t snapshot -o name rg/vol)"
z destroy -R rg/vol@%
z list -H -t all -o name | grep -q "rg/vol@\|rg/cl" && fail "-R @% left: $(z list -H -t all -o name)"

# 6. written@ outside the lineage; the reservation and logical columns.
z snapshot rg/thick@t
[ "$(z get -H -o value,source written@rg/thick@t rg/vol)" = "-	-" ] ||
  fail "written@ another volume's snapshot: $(z get -H -o value,source written@rg/thick@t rg/vol)"
w rg/thick 0 3
z snapshot rg/thick@u
read -r refres ubr refer used lref <<<"$(z get -Hp -o value \
  refreservation,usedbyrefreservation,referenced,used,logicalreferenced rg/thick | tr '\n' ' ')"
[ "$refres" -ge $((8 * M)) ] || fail "a thick volume's refreservation: $refres"
[ "$ubr" = $((refres - refer)) ] || fail "usedbyrefreservation $ubr, refreservation $refres, referenced $refer"
[ "$used" = $((refer + ubr)) ] || fail "used $used != referenced $refer + usedbyrefreservation $ubr"
near "$lref" $((3 * M)) || fail "logicalreferenced $lref after 3 MiB"
[ "$(z list -Hp -o usedbyrefreservation,logicalreferenced rg/thick)" = "$ubr	$lref" ] ||
  fail "zfs list and zfs get disagree: $(z list -Hp -o usedbyrefreservation,logicalreferenced rg/thick)"
[ "$(z get -H -o value refreservation,usedbyrefreservation rg/vol | tr '\n' ' ')" = "none 0B " ] ||
  fail "a sparse volume: $(z get -H -o value refreservation,usedbyrefreservation rg/vol)"
echo PASS
