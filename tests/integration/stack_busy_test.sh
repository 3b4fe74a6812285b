#!/usr/bin/env bash
# What is in use cannot be destroyed, and `volstack status` shows what uses what. The seed's
# stack (pool trunk on a file → trunk/funk → PV → vg0 → lv0 → devfs → loop → XFS, mounted),
# plus a spare volume held open by a process. Then:
#   1. status (tree and --json) shows the volume as a PV of vg0, the LV's loop device and
#      its mount point, the PV and VG sizes;
#   2. zfs destroy (of the PV volume, -r of the pool, of the held-open volume), zpool
#      export/destroy, lvremove and vgremove -f are refused with a clear reason, and nothing
#      changes (the names are all there, the XFS manifest verifies);
#   3. after `down`, offline: the recorded loop binding still makes lvremove refuse; status
#      without a daemon shows the same pools, volumes, VGs and LVs as with one;
#   4. released (loop detached, LV removed), the same verbs succeed through the daemon.
source "$(dirname "$0")/lib.sh"
need_root
need_cmd mkfs.xfs mount sha256sum python3
[ -e /dev/fuse ] || skip "needs /dev/fuse"

truncate -s 1G "$T/trunk.img"
vs zpool create trunk "$T/trunk.img"
vs zfs create -V 512M trunk/funk
vs zfs create -V 16M trunk/spare
vs pvcreate trunk/funk >/dev/null
vs vgcreate vg0 trunk/funk >/dev/null
vs lvcreate -L 320M -n lv0 vg0 >/dev/null

on_exit_stop_daemon
vs up
on_exit "umount -l $VS_STATE/dev"
mount_new_xfs_on vg0/lv0
for i in $(seq 1 8); do head -c $((i * 61 * 1024)) /dev/urandom >"$T/mnt/f$i"; done
(cd "$T/mnt" && sha256sum f* >"$T/manifest")
sync
# A process holds the spare volume's devfs file open.
(exec 9<"$VS_STATE/dev/trunk/spare" && exec sleep 60) &
holder=$!
on_exit_kill "$holder"
for _ in $(seq 50); do [ -e "/proc/$holder/fd/9" ] && break; sleep 0.1; done

# 1. The tree.
vs status >"$T/status"
for want in "pool trunk  ONLINE" "vdev $T/trunk.img" "volume trunk/funk  512M" "PV of VG vg0" \
  "vg vg0" "pv trunk/funk" "lv vg0/lv0  320M  active" "devfs $VS_STATE/dev/vg0/lv0" \
  "loop $loop  4096-byte sectors" "mounted on $T/mnt (xfs)"; do
  grep -qF "$want" "$T/status" || fail "status lacks '$want':
$(cat "$T/status")"
done
vs status --json >"$T/status.json"
python3 - "$T/status.json" "$loop" "$T/mnt" <<'EOF' || fail "status --json: $(cat "$T/status.json")"
import json, sys
doc, loop, mnt = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
assert doc["daemon"] is True
vol = [v for v in doc["pools"][0]["volumes"] if v["name"] == "trunk/funk"][0]
assert vol["pv_of"] == "vg0", vol
assert any("PV of VG vg0" in u for u in vol["used_by"]), vol
lv = doc["vgs"][0]["lvs"][0]
assert lv["name"] == "vg0/lv0" and lv["active"], lv
assert lv["exports"]["loops"][0]["device"] == loop, lv
assert lv["exports"]["loops"][0]["mounts"][0]["mount_point"] == mnt, lv
assert any(u.startswith("bound to " + loop) for u in lv["used_by"]), lv
EOF

# 2. Refusals.
refused() {  # $1: what stderr must say; the rest: the command
  local want=$1
  shift
  expect_fail vs "$@"
  grep -q -- "$want" "$T/expect_fail.err" || fail "$*: $(cat "$T/expect_fail.err")"
}
refused "dataset is busy (trunk/funk is a PV of VG vg0, which has active LVs)" zfs destroy trunk/funk
refused "dataset is busy" zfs destroy -r trunk
refused "dataset is busy (trunk/spare is open by pid $holder (sleep))" zfs destroy trunk/spare
refused "cannot export 'trunk': pool is busy" zpool export trunk
refused "cannot destroy 'trunk': pool is busy" zpool destroy -f trunk
refused "Logical volume vg0/lv0 in use (vg0/lv0 is bound to $loop, mounted on $T/mnt)" lvremove -f vg0/lv0
refused "Volume group \"vg0\" is in use" vgremove -f vg0
vs zfs list -H -o name >"$T/names"
for n in trunk trunk/funk trunk/spare; do grep -qx "$n" "$T/names" || fail "$n gone after a refusal"; done
vs lvs --noheadings -o lv_name,vg_name | grep -q "lv0 *vg0" || fail "vg0/lv0 gone after a refusal"
(cd "$T/mnt" && sha256sum -c --quiet "$T/manifest") || fail "manifest after the refusals"
kill "$holder"
wait "$holder" 2>/dev/null || true

# 3. Offline: the recorded binding is a use; status matches the daemon's.
umount "$T/mnt"
vs status --json >"$T/online.json"
vs down
refused "recorded for \`up\` as bound to $loop" lvremove -f vg0/lv0
vs status >"$T/status.offline"
grep -qF "loop $loop  4096-byte sectors  (not bound; restored at up)" "$T/status.offline" ||
  fail "offline status: $(cat "$T/status.offline")"
grep -qF "lv vg0/lv0  320M  inactive (active at up)" "$T/status.offline" ||
  fail "offline status: $(cat "$T/status.offline")"
vs status --json >"$T/offline.json"
python3 - "$T/online.json" "$T/offline.json" <<'EOF' || fail "status differs with and without the daemon"
import json, sys
def shape(doc):
    pools = [(p["name"], p["health"], p["size"], p["vdevs"],
              [(v["name"], v["size"], v["volblocksize"], v["pv_of"]) for v in p["volumes"]])
             for p in doc["pools"]]
    vgs = [(g["name"], g["size"], g["free"], g["pvs"], [(l["name"], l["size"]) for l in g["lvs"]])
           for g in doc["vgs"]]
    return pools, vgs
a, b = shape(json.load(open(sys.argv[1]))), shape(json.load(open(sys.argv[2])))
if a != b:
    print(a, b, sep="\n")
    sys.exit(1)
EOF

# 4. Released, the verbs work.
vs up
vs losetup -D
vs lvremove -f vg0/lv0 >/dev/null || fail "lvremove of a released LV"
vs vgremove vg0 >/dev/null || fail "vgremove of an empty VG"
# Through the daemon: its devfs lets go of a released volume.
vs zfs destroy trunk/spare || fail "zfs destroy of a released volume"
[ ! -e "$VS_STATE/dev/trunk/spare" ] || fail "devfs still shows a destroyed volume"
vs zfs destroy trunk/funk || fail "zfs destroy of a released volume"
vs zpool destroy trunk || fail "zpool destroy of an idle pool"
vs zpool list -H -o name | grep -qx trunk && fail "trunk still listed after zpool destroy"
vs down
echo "PASS"
