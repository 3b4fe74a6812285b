#!/bin/bash
# zpool add through the CLI on sparse files, no daemon (each command imports the pool from
# the zpool.cache): what it checks and how:
#   1. refused adds (a device too small, one already in the pool, one given twice, a
#      raidz1 of one device, a missing file, no vdevs, no such pool) print one error line,
#      exit non-zero and change nothing: zpool status/list and the cache are identical, and
#      the refused files carry no label (a later add takes them without -f);
#   2. a plain vdev, a mirror and a raidz1 are added: status shows their rows ONLINE, the
#      size grows by theirs, and a volume larger than the first vdev fits;
#   3. export and import -d find all four vdevs; an import without the raidz's one file
#      imports DEGRADED; one without the plain vdev refuses (devices missing).
source "$(dirname "$0")/lib.sh"

for f in a b c d e f g; do truncate -s 128M "$T/$f"; done
truncate -s 16M "$T/tiny"
zp() { timeout 30 "$VOLSTACK" zpool "$@"; }
zp create trunk "$T/a"
size0=$(zp list -Hp -o size trunk)

snapshot() {
  zp status trunk
  zp list -Hp -o name,size,alloc,health
  cat "$VS_STATE/zpool.cache" 2>/dev/null || true
}
snapshot >"$T/before"
refused() {
  [ "$(wc -l <"$T/expect_fail.err")" -ge 1 ] || fail "no error message for: $*"
  grep -q "$1" "$T/expect_fail.err" || fail "$2: $(cat "$T/expect_fail.err")"
  snapshot >"$T/after"
  cmp -s "$T/before" "$T/after" || fail "state changed after a refused add ($2): $(diff "$T/before" "$T/after")"
}
expect_fail zp add trunk "$T/tiny"
refused "too small" "a device too small"
expect_fail zp add trunk "$T/a"
refused "trunk" "a device already in the pool"
expect_fail zp add trunk mirror "$T/b" "$T/b"
refused "." "a device given twice"
expect_fail zp add trunk raidz1 "$T/b"
refused "raidz1 requires at least 2 devices" "a raidz1 of one device"
expect_fail zp add trunk "$T/b" mirror "$T/c" "$T/missing"
refused "missing" "a missing file"
expect_fail zp add trunk
refused "zpool add" "no vdevs"
expect_fail zp add nopool "$T/b"
refused "nopool" "no such pool"

# 2. Plain, mirror, raidz1.
zp add trunk "$T/b"
zp add trunk mirror "$T/c" "$T/d"
zp add trunk raidz1 "$T/e" "$T/f" "$T/g"
zp status trunk >"$T/status"
for row in "$T/a" "$T/b" mirror-2 "$T/c" "$T/d" raidz1-3 "$T/e" "$T/f" "$T/g"; do
  grep -Eq "^\s+$row\s+ONLINE" "$T/status" || fail "no ONLINE row $row: $(cat "$T/status")"
done
size=$(zp list -Hp -o size trunk)
# Four vdevs' worth: a, b, the mirror (one copy) and the raidz1 (two data columns).
[ "$size" -gt $((size0 * 4)) ] || fail "size $size after adds (one vdev: $size0)"
timeout 30 "$VOLSTACK" zfs create -V 300M trunk/big
[ "$(timeout 30 "$VOLSTACK" zfs get -Hp -o value volsize trunk/big)" = $((300 * 1024 * 1024)) ] ||
  fail "volume larger than the first vdev"

# 3. Export and import.
zp export trunk
mkdir "$T/moved"
mv "$T/a" "$T/b" "$T/c" "$T/d" "$T/e" "$T/f" "$T/g" "$T/moved/"
zp import -d "$T/moved" trunk
zp status trunk >"$T/imported"
# (A mirror's or raidz's children keep the paths their labels name.)
for row in "$T/moved/a" "$T/moved/b" mirror-2 raidz1-3; do
  grep -Eq "^\s+$row\s+ONLINE" "$T/imported" || fail "no ONLINE row $row after import: $(cat "$T/imported")"
done
[ "$(grep -Ec "/[a-g]\s+ONLINE" "$T/imported")" = 7 ] || fail "not 7 ONLINE leaves: $(cat "$T/imported")"
grep -q "^ state: ONLINE" "$T/imported" || fail "not ONLINE after import: $(cat "$T/imported")"
zp export trunk
mkdir "$T/aside"
mv "$T/moved/g" "$T/aside/"
zp import -d "$T/moved" trunk
zp status trunk >"$T/degraded"
grep -q "^ state: DEGRADED" "$T/degraded" || fail "not DEGRADED without g: $(cat "$T/degraded")"
timeout 30 "$VOLSTACK" zfs list -H -o name | grep -qx trunk/big || fail "volume lost"
zp export trunk
mv "$T/aside/g" "$T/moved/"
mv "$T/moved/b" "$T/aside/"
expect_fail zp import -d "$T/moved" trunk
grep -q "missing" "$T/expect_fail.err" || fail "import without b: $(cat "$T/expect_fail.err")"
echo PASS
