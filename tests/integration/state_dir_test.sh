#!/bin/bash
# The state dir under concurrent writers and hostile neighbours (util/state_file.h):
#   - eight `zpool create` and eight `pvcreate` run at once without a daemon: every pool is
#     in zpool.cache and every PV in lvm/devices (each update is a read-modify-write under
#     the state dir's lock);
#   - a symlink planted at lvm/devices.tmp (the fixed temporary name writers once used) is
#     not followed: the file it points at is unchanged;
#   - a state dir writable by others is refused with one clear error, and nothing is
#     written anywhere: not in the dir, not on the vdev (sha256sum before and after).
source "$(dirname "$0")/lib.sh"

for i in $(seq 8); do truncate -s 64M "$T/pool$i" "$T/pv$i"; done

pids=()
for i in $(seq 8); do
  vs zpool create "p$i" "$T/pool$i" 2>"$T/create$i.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a parallel zpool create failed: $(cat "$T"/create*.err)"; done
[ "$(vs zpool list -H -o name | sort | tr '\n' ' ')" = "p1 p2 p3 p4 p5 p6 p7 p8 " ] ||
  fail "pools missing from zpool.cache: $(vs zpool list -H -o name | tr '\n' ' ')"

# The old fixed temporary name, planted as a symlink to a file root must not overwrite.
mkdir -p "$VS_STATE/lvm"
echo precious >"$T/victim"
ln -s "$T/victim" "$VS_STATE/lvm/devices.tmp"

pids=()
for i in $(seq 8); do
  timeout 60 "$VOLSTACK" pvcreate "$T/pv$i" >/dev/null 2>"$T/pvcreate$i.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a parallel pvcreate failed: $(cat "$T"/pvcreate*.err)"; done
for i in $(seq 8); do
  grep -qx "$T/pv$i" "$VS_STATE/lvm/devices" || fail "pv$i missing from lvm/devices"
done
[ "$(cat "$T/victim")" = precious ] || fail "the planted symlink was followed"
[ -L "$VS_STATE/lvm/devices.tmp" ] || fail "the planted symlink was replaced"
ls "$VS_STATE/lvm" | grep -q '\.tmp\.' && fail "a temporary file was left behind"

# A state dir others can write to: refused before anything is written.
bad=$T/open-state
mkdir "$bad"
chmod 0777 "$bad"
truncate -s 64M "$T/fresh"
sum=$(sha256sum <"$T/fresh")
expect_fail vs --state-dir "$bad" zpool create fresh "$T/fresh"
grep -q "state dir refused: $bad (mode 0777) is writable by group or others" "$T/expect_fail.err" ||
  fail "no clear error: $(cat "$T/expect_fail.err")"
[ "$(wc -l <"$T/expect_fail.err")" = 1 ] || fail "more than one error line: $(cat "$T/expect_fail.err")"
[ "$(sha256sum <"$T/fresh")" = "$sum" ] || fail "a label was written through a refused state dir"
[ -z "$(ls -A "$bad")" ] || fail "something was written in the refused state dir: $(ls -A "$bad")"
expect_fail vs --state-dir "$bad" pvcreate "$T/fresh"
[ "$(sha256sum <"$T/fresh")" = "$sum" ] || fail "a PV label was written through a refused state dir"
[ -z "$(ls -A "$bad")" ] || fail "pvcreate wrote in the refused state dir"
# Read-only commands are refused too: the cache names the devices root opens.
expect_fail vs --state-dir "$bad" zpool list

# A state dir owned by another user.
other=$T/other-state
mkdir -m 0700 "$other"
chown 4242:4242 "$other"
expect_fail vs --state-dir "$other" zpool create fresh "$T/fresh"
grep -q "is owned by uid 4242" "$T/expect_fail.err" || fail "owner not named: $(cat "$T/expect_fail.err")"
[ "$(sha256sum <"$T/fresh")" = "$sum" ] || fail "a label was written through another user's state dir"
echo PASS
