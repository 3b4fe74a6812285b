#!/bin/bash
# A VG holding an LV of every segment type lvm2 writes (raid1, raid5, mirror, snapshot,
# thin-pool and thin, cache and cache-pool, writecache, integrity, vdo-pool and vdo, error,
# zero, and a type lvm2 itself does not know), built as an administrator restores one: the
# metadata text is generated here and applied with lvm2's vgcfgrestore (no device-mapper
# needed), checked with vgck. Then volstack:
#   1. lists every LV as lvm2's `lvs -a` does (type, attr, sizes, pool/origin/log columns);
#   2. rewrites the metadata for other LVs (lvcreate, lvextend, lvremove, pvmove) without
#      changing a byte of the others or of the historical LVs: lvm2's own vgcfgbackup before
#      and after is the same (seqno and header aside), lvm2's `lvs -H` still lists them, and
#      vgck passes;
#   3. refuses to activate an unserved LV (one line naming it and its type) and activates
#      and reads the linear LV (and the raid1 and mirror LVs, which volstack serves);
#   4. refuses every change to an unserved LV or its sub-LVs with one error, nothing written;
#   5. `lvremove vgx` removes lin, reports each LV it cannot remove in one line, exits non-zero.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd lvm losetup dd cmp sha256sum
[ -e /dev/loop-control ] || skip "needs loop devices"
setup_lvm2_env

new_loop a 64M; A=$LOOP
new_loop b 64M; B=$LOOP
lvm2_config_for $A $B

# An lvm2 UUID (6-4-4-4-4-4-6 of [0-9a-f]) derived from a name, so the text is reproducible.
uuid() {
  local s
  s=$(printf '%s' "$1" | sha256sum | head -c 32)
  echo "${s:0:6}-${s:6:4}-${s:10:4}-${s:14:4}-${s:18:4}-${s:22:4}-${s:26:6}"
}
lv() {  # lv NAME STATUS EXTENTS SEGMENT-BODY
  printf '%s {\nid = "%s"\nstatus = [%s]\nflags = []\ncreation_time = 1796661679\n' "$1" "$(uuid "lv-$1")" "$2"
  printf 'creation_host = "vm"\nsegment_count = 1\n\nsegment1 {\nstart_extent = 0\n'
  printf 'extent_count = %s\n\n%s\n}\n}\n' "$3" "$4"
}
lin() {  # lin NAME STATUS PV PE EXTENTS
  lv "$1" "$2" "$5" "$(printf 'type = "striped"\nstripe_count = 1\n\nstripes = [\n"%s", %s\n]' "$3" "$4")"
}
raid() {  # raid NAME TYPE EXTENTS-PER-IMAGE "PV:PE PV:PE ...": images and their metadata
  local name=$1 type=$2 per=$3 i=0 legs=() list="" pv pe
  for leg in $4; do legs+=("$leg"); done
  local n=${#legs[@]} total=$3
  [ "$type" = raid1 ] || total=$((per * (n - 1)))
  for ((i = 0; i < n; i++)); do
    list+="\"${name}_rmeta_$i\", \"${name}_rimage_$i\""
    [ $i -lt $((n - 1)) ] && list+=","
    list+=$'\n'
  done
  local extra=""
  [ "$type" = raid1 ] || extra=$'\nstripe_size = 128'
  lv "$name" "$V" "$total" "$(printf 'type = "%s"\ndevice_count = %s%s\nregion_size = 1024\n\nraids = [\n%s]' "$type" "$n" "$extra" "$list")"
  for ((i = 0; i < n; i++)); do
    pv=${legs[$i]%%:*} pe=${legs[$i]##*:}
    lin "${name}_rmeta_$i" "$RW" "$pv" "$pe" 1
    lin "${name}_rimage_$i" "$RW" "$pv" $((pe + 1)) "$per"
  done
}
RW='"READ", "WRITE"' V='"READ", "WRITE", "VISIBLE"'
gen_vg() {
  cat <<HDR
contents = "Text Format Volume Group"
version = 1
description = "volstack test"
creation_host = "vm"
creation_time = 1796661680

vgx {
id = "$(uuid vg)"
seqno = 1
format = "lvm2"
status = ["RESIZEABLE", "READ", "WRITE"]
flags = []
extent_size = 2048
max_lv = 0
max_pv = 0
metadata_copies = 0
physical_volumes {
pv0 {
id = "$(uuid pv0)"
device = "$A"
status = ["ALLOCATABLE"]
flags = []
dev_size = 131072
pe_start = 2048
pe_count = 63
}
pv1 {
id = "$(uuid pv1)"
device = "$B"
status = ["ALLOCATABLE"]
flags = []
dev_size = 131072
pe_start = 2048
pe_count = 63
}
}
logical_volumes {
HDR
  lin lin "$V" pv0 0 4
  raid r1 raid1 2 "pv0:4 pv1:0"
  raid r5 raid5_ls 1 "pv0:30 pv1:30 pv0:40"
  lv m "$V" 2 $'type = "mirror"\nmirror_count = 2\nmirror_log = "m_mlog"\nregion_size = 1024\n\nmirrors = [\n"m_mimage_0", 0,\n"m_mimage_1", 0\n]'
  lin m_mlog "$RW" pv0 7 1
  lin m_mimage_0 "$RW" pv0 8 2
  lin m_mimage_1 "$RW" pv1 3 2
  lin origin "$V" pv0 10 2
  lin snap "$V" pv1 5 2
  lv snapshot0 "$RW" 2 $'type = "snapshot"\nchunk_size = 8\norigin = "origin"\ncow_store = "snap"'
  lv pool "$V" 4 $'type = "thin-pool"\nmetadata = "pool_tmeta"\npool = "pool_tdata"\ntransaction_id = 1\nchunk_size = 128\ndiscards = "passdown"\nzero_new_blocks = 1'
  lin pool_tdata "$RW" pv0 12 4
  lin pool_tmeta "$RW" pv1 7 1
  lin lvol0_pmspare "$RW" pv1 8 1
  lv thin1 "$V" 8 $'type = "thin"\nthin_pool = "pool"\ntransaction_id = 0\ndevice_id = 1'
  lv cached "$V" 2 $'type = "cache"\ncache_pool = "cpool"\norigin = "cached_corig"'
  lin cached_corig "$RW" pv0 16 2
  lv cpool "$RW" 1 $'type = "cache-pool"\ndata = "cpool_cdata"\nmetadata = "cpool_cmeta"\nmetadata_format = 2\nchunk_size = 128\ncache_mode = "writethrough"\npolicy = "smq"'
  lin cpool_cdata "$RW" pv1 9 1
  lin cpool_cmeta "$RW" pv1 10 1
  lv vpool "$V" 4 "$(printf '%s\n' 'type = "vdo-pool"' 'data = "vpool_vdata"' 'header_size = 512' \
    'virtual_extents = 10' 'use_compression = 1' 'use_deduplication = 1' 'use_metadata_hints = 1' \
    'minimum_io_size = 512' 'block_map_cache_size_mb = 128' 'block_map_era_length = 16380' \
    'use_sparse_index = 0' 'index_memory_size_mb = 256' 'max_discard = 1' 'slab_size_mb = 2048' \
    'ack_threads = 1' 'bio_threads = 4' 'bio_rotation = 64' 'cpu_threads = 2' 'hash_zone_threads = 1' \
    'logical_threads = 1' 'physical_threads = 1' 'write_policy = "auto"')"
  lin vpool_vdata "$RW" pv0 18 4
  lv vlv "$V" 10 $'type = "vdo"\nvdo_pool = "vpool"\nvdo_offset = 0'
  lv wc "$V" 2 $'type = "writecache"\nwritecache = "fast_cvol"\norigin = "wc_wcorig"\nwritecache_block_size = 4096'
  lin wc_wcorig "$RW" pv0 22 2
  lin fast_cvol "$RW" pv1 11 1
  lv ilv "$V" 2 $'type = "integrity"\norigin = "ilv_iorig"\ndata_sectors = 4096\nintegrity_meta_dev = "ilv_imeta"\ntag_size = 4\nblock_size = 512\ninternal_hash = "crc32c"\nmode = "J"'
  lin ilv_iorig "$RW" pv0 24 2
  lin ilv_imeta "$RW" pv1 12 1
  lv err "$V" 1 'type = "error"'
  lv zer "$V" 1 'type = "zero"'
  lv unk "$V" 1 $'type = "frobnicate"\nknob = 7\nnames = ["a", "b"]'
  # Removed thin LVs lvm2 remembers (record_lvs_history): old1 was thin1's origin.
  printf '}\nhistorical_logical_volumes {\nold1 {\nid = "%s"\ncreation_time = 1796661000\n' "$(uuid old1)"
  printf 'removal_time = 1796661500\norigin = "-old0"\ndescendants = ["thin1"]\n}\n'
  printf 'old0 {\nid = "%s"\ncreation_time = 1796660000\nremoval_time = 1796661400\n}\n}\n}\n' "$(uuid old0)"
}

echo "== restore with lvm2"
lvm pvcreate "${LC[@]}" -q -ff -y -u "$(uuid pv0)" --norestorefile "$A" >/dev/null 2>&1
lvm pvcreate "${LC[@]}" -q -ff -y -u "$(uuid pv1)" --norestorefile "$B" >/dev/null 2>&1
gen_vg >"$T/vgx.txt"
# --force: lvm2 asks for it for any VG holding thin LVs.
lvm vgcfgrestore "${LC[@]}" --force -f "$T/vgx.txt" vgx >"$T/restore.out" 2>&1 ||
  fail "vgcfgrestore: $(cat "$T/restore.out")"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck after restore"

# lvm2 without device-mapper cannot know an LV's state and prints X in lv_attr's state and
# health columns; an inactive LV reads "-" there, as volstack says.
norm() { sed -E 's/ ([-a-zA-Z]{4})XX([-a-zA-Z]{2})[-X]([-a-zA-Z]) / \1--\2-\3 /'; }
compare_lvs() {  # compare_lvs WHAT: lvm2's and volstack's `lvs -a` (default fields + type)
  lvm lvs "${LC[@]}" -a -o +segtype vgx 2>/dev/null | norm >"$T/lvs.lvm2"
  vs lvs -a -o +segtype vgx >"$T/lvs.vs"
  diff -u "$T/lvs.lvm2" "$T/lvs.vs" || fail "$1: lvs -a differs between lvm2 and volstack"
  [ "$(wc -l <"$T/lvs.vs")" -ge 40 ] || fail "$1: lvs -a lists too few LVs"
  lvm vgs "${LC[@]}" vgx 2>/dev/null >"$T/vgs.lvm2"
  vs vgs vgx >"$T/vgs.vs"
  diff -u "$T/vgs.lvm2" "$T/vgs.vs" || fail "$1: vgs differs"
}
# lvm2's own backup of the VG, without the header, the seqno and the LVs named.
backup() {  # backup FILE [LV...]
  local f=$1
  shift
  lvm vgcfgbackup "${LC[@]}" -f "$f.raw" vgx >/dev/null 2>&1 || fail "vgcfgbackup"
  sed -e '1,/^vgx {/{/^vgx {/!d}' -e '/^\tseqno = /d' "$f.raw" >"$f"
  for lv in "$@"; do sed -i "/^\t\t$lv {\$/,/^\t\t}\$/d" "$f"; done
}
seqno() { lvm vgs "${LC[@]}" --noheadings -o vg_seqno vgx 2>/dev/null | tr -d ' '; }

echo "== 1. volstack lists every LV as lvm2 does"
vs pvscan "$A" "$B" >/dev/null
compare_lvs "after restore"
vs lvs -a -o lv_name,segtype vgx | grep -q "r1_rimage_0.*linear" || fail "no r1_rimage_0"

echo "== 2. rewrites for other LVs keep every other byte"
backup "$T/before"
vs lvcreate -L 3m -n new1 vgx >/dev/null
vs lvextend -L +2m vgx/new1 >/dev/null
vs lvremove -y vgx/new1 >/dev/null
backup "$T/after"
diff -u "$T/before" "$T/after" || fail "lvcreate/lvextend/lvremove of another LV changed the VG"
grep -q $'^\thistorical_logical_volumes {' "$T/after" || fail "no historical LVs in lvm2's backup"
lvm lvs "${LC[@]}" -H --noheadings -o lv_name vgx 2>/dev/null >"$T/hlvs"
grep -q -- "-old1" "$T/hlvs" && grep -q -- "-old0" "$T/hlvs" ||
  fail "lvm2 lists no historical LVs after volstack's rewrites: $(cat "$T/hlvs")"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck after volstack's rewrites"
# volstack's own backup file restores (through lvm2 and through volstack) to the same VG.
vs vgcfgbackup -f "$T/vs.backup" vgx >/dev/null
lvm vgcfgrestore "${LC[@]}" --force -f "$T/vs.backup" vgx >/dev/null 2>&1 || fail "lvm2 restore of volstack's backup"
backup "$T/after"
diff -u "$T/before" "$T/after" || fail "volstack's backup restored by lvm2 differs"
vs vgcfgrestore -f "$T/vs.backup" vgx >/dev/null || fail "volstack restore of its backup"
backup "$T/after"
diff -u "$T/before" "$T/after" || fail "volstack's backup restored by volstack differs"
# Lasting changes to lin (extended, then moved to the other PV): only lin differs.
vs lvextend -L +1m vgx/lin >/dev/null
vs pvmove -n lin "$A" "$B" >/dev/null || fail "pvmove of lin"
lvm lvs "${LC[@]}" --noheadings -o devices vgx/lin 2>/dev/null | grep -q "$B" || fail "lin not moved"
backup "$T/after.nolin" lin
diff -u <(sed "/^\t\tlin {\$/,/^\t\t}\$/d" "$T/before") "$T/after.nolin" ||
  fail "lvextend/pvmove of lin changed other LVs"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck after pvmove"
compare_lvs "after rewrites"

echo "== 3. activation"
if vs vgchange -a y vgx >"$T/act.out" 2>"$T/act.err"; then fail "vgchange -a y should report refusals"; fi
grep -q "vgx/r5 has segment type raid5_ls" "$T/act.err" || fail "no refusal for r5: $(cat "$T/act.err")"
# thin LVs are served (lvm_thin_test.sh), but this pool's metadata was never written.
grep -q "vgx/thin1: not activated: thin pool vgx/pool: its metadata was never formatted" "$T/act.err" ||
  fail "no refusal for thin1: $(cat "$T/act.err")"
[ "$(grep -c "vgx/r5 " "$T/act.err")" = 1 ] || fail "r5 refused in more than one line"
vs lvs --noheadings -o lv_attr vgx/lin | grep -q -- "-wi-a-----" || fail "lin not active"
# raid1 and mirror LVs are served (lvm_raid1_test.sh); their sub-LVs are not.
grep -q "vgx/r1 \|vgx/m " "$T/act.err" && fail "r1 or m refused: $(cat "$T/act.err")"
vs lvs --noheadings -o lv_attr vgx/r1 | grep -q -- "rwi-a-r---" || fail "r1 not active"
vs lvs --noheadings -o lv_attr vgx/m | grep -q -- "mwi-a-m---" || fail "m not active"
# Data at lin's first PE (lvm2's report says where) reads back through volstack.
pe_start=$(lvm pvs "${LC[@]}" --noheadings --units b --nosuffix -o pe_start "$B" 2>/dev/null | tr -d ' ')
first=$(lvm lvs "${LC[@]}" --noheadings -o devices vgx/lin 2>/dev/null | sed -E 's/.*\(([0-9]+)\).*/\1/')
head -c 4096 /dev/urandom >"$T/blk"
dd if="$T/blk" of="$B" bs=4096 seek=$(((pe_start + first * 1048576) / 4096)) conv=notrunc,fsync status=none
vs lvm-cat vgx/lin --offset 0 --length 4096 >"$T/got"
cmp -s "$T/blk" "$T/got" || fail "lin does not read back"
if vs lvm-cat vgx/r1_rimage_0 --length 4096 >/dev/null 2>"$T/cat.err"; then fail "r1_rimage_0 activated"; fi
[ "$(wc -l <"$T/cat.err")" = 1 ] && grep -q "r1_rimage_0 is part of LV vgx/r1 (segment type raid1)" "$T/cat.err" ||
  fail "refusal: $(cat "$T/cat.err")"
vs vgchange -a n vgx >/dev/null

echo "== 4. changes to unserved LVs are refused, nothing written"
backup "$T/before"
seq0=$(seqno)
refuse() {  # refuse LV-NAME-IN-MESSAGE COMMAND...
  local want=$1
  shift
  if vs "$@" >/dev/null 2>"$T/refuse.err"; then fail "not refused: $*"; fi
  grep -q "$want" "$T/refuse.err" || fail "$*: $(cat "$T/refuse.err")"
  [ "$(wc -l <"$T/refuse.err")" = 1 ] || fail "$*: more than one line: $(cat "$T/refuse.err")"
}
refuse "vgx/r1 has segment type raid1" lvremove -y vgx/r1
refuse "vgx/r1_rimage_0 is part of LV vgx/r1" lvremove -y vgx/r1_rimage_0
refuse "vgx/r5 has segment type raid5_ls" lvextend -L +1m vgx/r5
refuse "vgx/pool_tdata is part of LV vgx/pool" lvextend -L +1m vgx/pool_tdata
refuse "vgx/thin1 has segment type thin" lvrename vgx/thin1 t2
refuse "vgx/snap is part of LV vgx/snapshot0" lvreduce -y -L -1m vgx/snap
refuse "vgx/origin is part of LV vgx/snapshot0" lvremove -y vgx/origin
refuse "vgx/unk has segment type frobnicate" lvremove -y vgx/unk
refuse "vgx/r1_rimage_0 is part of LV vgx/r1" pvmove "$A:5" "$B"
refuse "which volstack does not serve: not removed" vgremove -f vgx
expect_fail vs vgreduce vgx "$A"
[ "$(seqno)" = "$seq0" ] || fail "a refused command wrote metadata"
backup "$T/after"
diff -u "$T/before" "$T/after" || fail "a refused command changed the VG"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck at the end"
compare_lvs "at the end"

echo "== 5. lvremove of the whole VG removes what it can and reports each LV it cannot"
if vs lvremove -y vgx >"$T/rm.out" 2>"$T/rm.err"; then fail "lvremove vgx should fail"; fi
grep -q 'Logical volume "lin" successfully removed' "$T/rm.out" || fail "lin not removed: $(cat "$T/rm.out" "$T/rm.err")"
for lv in r1 r5 m pool thin1 cached vpool vlv wc ilv err zer unk; do
  [ "$(grep -c "LV vgx/$lv has segment type" "$T/rm.err")" = 1 ] || fail "no single refusal for $lv: $(cat "$T/rm.err")"
done
grep -q "vgx/origin is part of LV vgx/snapshot0" "$T/rm.err" || fail "no refusal for origin"
lvm lvs "${LC[@]}" -a --noheadings -o lv_name vgx 2>/dev/null | grep -qw lin && fail "lvm2 still lists lin"
backup "$T/after"
# (lin's section goes with the blank line before it: squeeze blank runs to compare)
diff -u <(sed "/^\t\tlin {\$/,/^\t\t}\$/d" "$T/before" | cat -s) <(cat -s "$T/after") ||
  fail "lvremove vgx changed more than lin"
lvm vgck "${LC[@]}" vgx 2>/dev/null || fail "vgck after lvremove vgx"
echo PASS
