#!/bin/bash
# Pools and VGs share device names (dev/NAME/x is pool NAME's volume or VG NAME's LV), so a
# name is one kind's only (issue 37, item 7: a write to an LV's path once landed in a pool's
# volume of the same name). Checks, each with the exact error and the devices unchanged:
#   1. vgcreate, vgrename and vgcfgrestore refuse the name of a pool in zpool.cache;
#   2. zpool create refuses the name of a VG (here on a pool volume and on a file PV);
#   3. zpool import refuses a pool whose name a VG holds; once the VG is renamed it imports.
source "$(dirname "$0")/lib.sh"

truncate -s 128M "$T/a" "$T/b"
truncate -s 64M "$T/pv"
vs zpool create trunk "$T/a"
vs zfs create -V 32M trunk/v
vs pvcreate trunk/v >/dev/null
vs pvcreate "$T/pv" >/dev/null

# 1. A pool's name is not a VG's.
before=$(sha256sum <"$T/pv")
expect_fail vs vgcreate trunk "$T/pv"
grep -qx "  a pool called 'trunk' exists: pools and volume groups share device names (dev/trunk/...)" \
  "$T/expect_fail.err" || fail "vgcreate over a pool's name: $(cat "$T/expect_fail.err")"
[ "$(sha256sum <"$T/pv")" = "$before" ] || fail "a refused vgcreate wrote to the PV"
vs vgcreate vg trunk/v >/dev/null
vs vgcfgbackup vg >/dev/null
expect_fail vs vgrename vg trunk
grep -q "a pool called 'trunk' exists" "$T/expect_fail.err" ||
  fail "vgrename to a pool's name: $(cat "$T/expect_fail.err")"
vs vgs --noheadings -o vg_name vg >/dev/null || fail "the refused vgrename renamed"

# 2. A VG's name is not a pool's.
before=$(sha256sum <"$T/b")
expect_fail vs zpool create vg "$T/b"
[ "$(cat "$T/expect_fail.err")" = "volstack: cannot create 'vg': a volume group called 'vg' exists: pools and volume groups share device names (dev/vg/...): File exists" ] ||
  fail "zpool create over a VG's name: $(cat "$T/expect_fail.err")"
[ "$(sha256sum <"$T/b")" = "$before" ] || fail "a refused zpool create wrote labels"
vs vgcreate filevg "$T/pv" >/dev/null
expect_fail vs zpool create filevg "$T/b"
grep -q "a volume group called 'filevg' exists" "$T/expect_fail.err" ||
  fail "zpool create over a file VG's name: $(cat "$T/expect_fail.err")"

# 3. Import of a pool named like a VG.
vs zpool create other "$T/b"
vs zpool export other
vs vgrename filevg other >/dev/null
before=$(sha256sum <"$T/b")
expect_fail vs zpool import -d "$T" other
grep -q "cannot import 'other': a volume group called 'other' exists" "$T/expect_fail.err" ||
  fail "zpool import over a VG's name: $(cat "$T/expect_fail.err")"
[ "$(sha256sum <"$T/b")" = "$before" ] || fail "a refused import wrote to the vdev"
vs vgrename other filevg >/dev/null
vs zpool import -d "$T" other || fail "import once the name is free"
echo PASS
