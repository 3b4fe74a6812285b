# Steps the redundancy tests share (zpool_mirror_test.sh, zpool_raidz_test.sh), for the pool
# $POOL whose volume $POOL/vol carries XFS mounted at $T/mnt, with the files' checksums in
# $T/manifest. Source after lib.sh and after setting POOL.

bind_and_mount() {
  LOOP=$(timeout 20 "$VOLSTACK" losetup -f --show "$POOL/vol")
  on_exit_detach_loop "$LOOP"
  mount "$LOOP" "$T/mnt"
}
unmount_and_unbind() {
  umount "$T/mnt"
  timeout 20 "$VOLSTACK" losetup -d "$LOOP"
}
status() { timeout 20 "$VOLSTACK" zpool status -v "$POOL"; }
# Every file of the manifest reads back right: check_files WHEN
check_files() { (cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "files read wrong $1"; }

# A scrub repairs something, a second one nothing, and the files read right.
scrub_repairs_then_finds_nothing() {
  timeout 30 "$VOLSTACK" zpool scrub -w "$POOL"
  status >"$T/scrub1"
  grep -Eq "scan: scrub repaired [0-9.]+[KMG] in [0-9:]+ with 0 errors on" "$T/scrub1" ||
    fail "scrub repaired nothing: $(cat "$T/scrub1")"
  timeout 30 "$VOLSTACK" zpool scrub -w "$POOL"
  status >"$T/scrub2"
  grep -q "scan: scrub repaired 0B in .* with 0 errors" "$T/scrub2" ||
    fail "second scrub: $(cat "$T/scrub2")"
  check_files "after scrub"
}

# The stack taken down, the child file $1 deleted, the stack up again and the volume bound.
restart_without() {
  unmount_and_unbind
  timeout 30 "$VOLSTACK" down
  rm "$1"
  timeout 30 "$VOLSTACK" up
  bind_and_mount
}

# The pool is DEGRADED with the child file $1 UNAVAIL; its status is left in $T/degraded.
expect_degraded_without() {
  status >"$T/degraded"
  grep -q "^ state: DEGRADED" "$T/degraded" || fail "not DEGRADED: $(cat "$T/degraded")"
  grep -Eq "^\s+$1\s+UNAVAIL" "$T/degraded" || fail "$1 not UNAVAIL: $(cat "$T/degraded")"
}

# zpool replace OLD NEW resilvers to ONLINE.
replace_resilvers() {
  timeout 30 "$VOLSTACK" zpool replace "$POOL" "$1" "$2"
  status >"$T/replaced"
  grep -q "^ state: ONLINE" "$T/replaced" || fail "not ONLINE after replace: $(cat "$T/replaced")"
  grep -Eq "^\s+$2\s+ONLINE" "$T/replaced" || fail "$2 not ONLINE: $(cat "$T/replaced")"
  grep -Eq "scan: resilvered [0-9.]+[KMG] in .* with 0 errors" "$T/replaced" ||
    fail "no resilver: $(cat "$T/replaced")"
}
