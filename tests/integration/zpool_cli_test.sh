#!/bin/bash
# zpool/zfs verbs through the real CLI on sparse files: create a striped pool, create thick
# and sparse volumes, list/get/set, write through the device-name resolver is not needed:
# the checks are what zfs/zpool print and that state survives between invocations (the
# zpool.cache), export + import -d, destroy; and bad input: a non-pool vdev, bad sizes,
# duplicate names, a vdev already in a pool -> one clear error line, non-zero exit, and
# nothing changed (zpool list / zfs list identical before and after).
source "$(dirname "$0")/lib.sh"

truncate -s 256M "$T/a" "$T/b"
truncate -s 128M "$T/junk"
mkdir "$T/vdevs"
truncate -s 256M "$T/vdevs/c"

vs zpool create trunk "$T/a" "$T/b"
vs zpool list -H -o name,health | grep -qx $'trunk\tONLINE' || fail "pool not listed ONLINE"
size=$(vs zpool list -Hp -o size trunk)
[ "$size" -gt $((500 * 1024 * 1024)) ] || fail "striped pool size $size too small"
vs zpool status trunk | grep -q "$T/b" || fail "status does not show vdev b"
vs zpool get -H -o value ashift trunk | grep -qx 12 || fail "default ashift is not 12"

vs zfs create -V 64M trunk/funk
vs zfs create -s -V 1G -b 4K -o user:owner=seed trunk/thin
vs zfs list -H -o name,volsize,volblocksize -t volume >"$T/list"
grep -qx $'trunk/funk\t64M\t16K' "$T/list" || { cat "$T/list"; fail "funk row"; }
grep -qx $'trunk/thin\t1G\t4K' "$T/list" || { cat "$T/list"; fail "thin row"; }
vs zfs list | head -1 | grep -Eq '^NAME +USED +AVAIL +REFER +MOUNTPOINT$' || fail "zfs list header"
used=$(vs zfs get -Hp -o value used trunk/funk)
[ "$used" -ge $((64 * 1024 * 1024)) ] || fail "thick volume does not reserve its size ($used)"
[ "$(vs zfs get -H -o value refreservation trunk/thin)" = none ] || fail "sparse has a reservation"
# Sources as zfs reports them: a thick volume's reservation is set by its creation, a
# volblocksize other than the default has none.
vs zfs get -H -o value,source refreservation trunk/funk | grep -qx $'[0-9.]*M\tlocal' || fail "thick refreservation source"
vs zfs get -H -o value,source refreservation trunk/thin | grep -qx $'none\tdefault' || fail "sparse refreservation source"
vs zfs get -H -o source volblocksize trunk/funk trunk/thin | tr '\n' ' ' | grep -qx 'default - ' || fail "volblocksize source"
[ "$(vs zfs get -H -o value user:owner trunk/thin)" = seed ] || fail "user property"
vs zfs set volsize=128M trunk/funk
[ "$(vs zfs get -Hp -o value volsize trunk/funk)" = $((128 * 1024 * 1024)) ] || fail "volsize growth"
vs zfs set sync=always trunk/funk
vs zfs get -H -o value,source sync trunk/funk | grep -qx $'always\tlocal' || fail "sync=always"
vs zfs set checksum=sha256 readonly=on trunk/thin
# The memory bounds are pool properties, stored in bytes and shown as sizes.
vs zpool get -H -o value,source cachemax,dirtymax trunk | tr '\n' ' ' | grep -qx $'256M\tdefault 64M\tdefault ' || fail "default memory bounds"
vs zpool set cachemax=1G trunk
vs zpool set dirtymax=32M trunk
[ "$(vs zpool get -Hp -o value,source dirtymax trunk)" = $'33554432\tlocal' ] || fail "dirtymax set"
[ "$(vs zpool get -Hp -o value cachemax trunk)" = $((1 << 30)) ] || fail "cachemax set"
[ "$(vs zpool list -H -o cachemax,dirtymax trunk)" = $'1G\t32M' ] || fail "memory bounds as columns"
[ "$(vs zfs get -H -o value readonly trunk/thin)" = on ] || fail "readonly"

# Bad input: one line on stderr, a non-zero exit, nothing changed.
snapshot() {
  vs zpool list -Hp -o name,size,alloc,cachemax,dirtymax
  vs zfs list -Hp -o name,used,volsize
  vs zfs get -Hp -o name,property,value readonly,refreservation,sync,user:owner trunk/funk trunk/thin
}
snapshot >"$T/before"
check_error() {
  local lines
  lines=$(wc -l <"$T/expect_fail.err")
  [ "$lines" -ge 1 ] || fail "no error message for: $*"
  snapshot >"$T/after"
  cmp -s "$T/before" "$T/after" || fail "state changed after failed: $*"
}
expect_fail vs zfs create -V 64M trunk/funk; check_error "duplicate volume"
grep -q "already exists" "$T/expect_fail.err" || fail "duplicate volume message"
expect_fail vs zfs create -V 12Q trunk/bad; check_error "bad size"
expect_fail vs zfs create -V 1000 trunk/bad; check_error "size not multiple of volblocksize"
expect_fail vs zfs create -V 64M -b 3K trunk/bad; check_error "bad volblocksize"
expect_fail vs zfs create -V 64M nopool/bad; check_error "no such pool"
expect_fail vs zfs create -V 100G trunk/huge; check_error "thick volume larger than the pool"
expect_fail vs zpool create trunk "$T/vdevs/c"; check_error "duplicate pool"
expect_fail vs zpool create other "$T/a"; check_error "vdev in use"
expect_fail vs zpool create -o ashift=99 other "$T/vdevs/c"; check_error "bad ashift"
expect_fail vs zpool create other "$T/missing"; check_error "missing vdev file"
expect_fail vs zfs set volsize=1M trunk/funk; check_error "shrink"
expect_fail vs zfs set sync=sometimes trunk/funk; check_error "bad sync value"
expect_fail vs zfs destroy trunk/nothing; check_error "destroy missing volume"
expect_fail vs zpool import -d "$T" junk; check_error "import of a non-pool"
# -f overrides a label of an exported or destroyed pool, never one of a pool imported here.
expect_fail vs zpool create -f other "$T/a"; check_error "-f on a vdev of an imported pool"
grep -q "imported pool 'trunk'" "$T/expect_fail.err" || fail "create -f message"
# zfs set checks every property before it applies any.
expect_fail vs zfs set readonly=on sync=bogus trunk/funk; check_error "one bad property of two"
expect_fail vs zfs set user:a=1 volsize=1T trunk/funk; check_error "volsize out of space"
expect_fail vs zfs set volsize=256M volsize=200M trunk/funk; check_error "property given twice"
expect_fail vs zfs set refreservation=1T trunk/thin; check_error "refreservation over avail"
expect_fail vs zfs set volsize=2G trunk/thin; check_error "grow a read-only volume"
expect_fail vs zfs set 'Bad:x=1' trunk/funk; check_error "user property name"
expect_fail vs zpool set comment="$(printf 'x%.0s' {1..40})" trunk; check_error "long comment"
expect_fail vs zpool set cachemax=1M trunk; check_error "cachemax under 16M"
expect_fail vs zpool set dirtymax=1E trunk; check_error "dirtymax past 16G"
expect_fail vs zpool set cachemax=lots trunk; check_error "cachemax not a size"
expect_fail vs zpool create -o dirtymax=2K other "$T/vdevs/c"; check_error "create with a bad bound"
expect_fail vs zfs create -s -V 8E trunk/huge8e; check_error "volume over 8E"
expect_fail vs zfs create -V 16M -o sync=always -o sync=disabled trunk/dup; check_error "-o twice"
expect_fail vs zfs create -V 16M -o volsize=32M trunk/dup; check_error "-V and -o volsize"
# Unknown property or column names are errors; zfs's upper-case column names are not.
expect_fail vs zfs get foo trunk/funk; check_error "zfs get of an unknown property"
expect_fail vs zfs list -o name,foo; check_error "zfs list of an unknown column"
expect_fail vs zpool get size,bogus trunk; check_error "zpool get of an unknown property"
expect_fail vs zpool list -o name,bogus; check_error "zpool list of an unknown column"
[ "$(vs zfs list -H -o NAME,VOLSIZE trunk/funk)" = $'trunk/funk\t128M' ] || fail "upper-case columns"
# A missing pool or argument: one line naming the verb once, and no table header.
[ -z "$(vs zpool list nosuch 2>"$T/expect_fail.err")" ] || fail "zpool list of a missing pool printed a table"
grep -qx "volstack: cannot open 'nosuch': no such pool.*" "$T/expect_fail.err" || fail "zpool list of a missing pool"
expect_fail vs zpool create; check_error "zpool create without a pool"
grep -qx "volstack: zpool create: .*" "$T/expect_fail.err" || fail "usage error names the verb once"
[ -z "$(od -An -tx1 -j16384 -N16 "$T/vdevs/c" | tr -d ' 0\n')" ] || fail "failed create wrote to a vdev"

# Export, then find the pool by its labels and import it from a directory.
vs zpool export trunk
vs zpool list -H | grep -q trunk && fail "exported pool still listed"
mkdir "$T/moved"
mv "$T/a" "$T/b" "$T/moved/"
vs zpool import -d "$T/moved" >"$T/importable"
grep -q "pool: trunk" "$T/importable" || { cat "$T/importable"; fail "import list"; }
vs zpool import -d "$T/moved" trunk
vs zfs list -H -o name | grep -qx trunk/thin || fail "volume lost over export/import"
[ "$(vs zfs get -Hp -o value volsize trunk/funk)" = $((128 * 1024 * 1024)) ] || fail "volsize lost"
[ "$(vs zfs get -H -o value user:owner trunk/thin)" = seed ] || fail "user property lost"
[ "$(vs zpool get -H -o value,source cachemax trunk)" = $'1G\tlocal' ] || fail "cachemax lost"

vs zfs destroy trunk/thin
vs zfs list -H -o name | grep -q trunk/thin && fail "destroyed volume listed"

# A pool whose vdev went away: the others are still listed, and it can be forgotten.
vs zpool create gone "$T/vdevs/c"
mv "$T/vdevs/c" "$T/c.moved"
expect_fail vs zpool get -H -o name,value size >/dev/null
grep -q "^trunk" <(vs zpool get -H -o name,value size 2>/dev/null || true) || fail "other pools hidden"
expect_fail vs zpool destroy gone
vs zpool export gone
vs zpool list -H -o name | grep -q gone && fail "forgotten pool still listed"
# A pool busy in another process (here: this shell locks a vdev) is not forgotten.
exec 9<"$T/moved/a"
flock -n 9
expect_fail vs zpool export trunk
exec 9<&-
vs zpool list -H -o name | grep -qx trunk || fail "a busy pool was forgotten"
vs zpool destroy trunk
vs zpool list -H | grep -q trunk && fail "destroyed pool listed"
# A destroyed pool's vdevs can be reused.
vs zpool create again "$T/moved/a"
vs zpool destroy again
echo "PASS"
