#include "lvm/mirrored_lv.h"

#include <algorithm>

#include "lvm/activations.h"
#include "lvm/kept_lvs.h"

namespace volstack::lvm {

namespace {

const ConfigNode* Item(const Segment& seg, std::string_view key) {
  for (const auto& item : seg.kept_items) {
    if (item.key == key && !item.is_section) return &item;
  }
  return nullptr;
}

int64_t IntItem(const Segment& seg, std::string_view key, int64_t def) {
  const ConfigNode* n = Item(seg, key);
  if (!n || n->is_array || n->values.size() != 1 || n->values[0].type != ConfigValue::Type::kInt) {
    return def;
  }
  return n->values[0].integer;
}

Status Bad(const VolumeGroup& vg, const LogicalVolume& lv, const std::string& why) {
  return Status::Corruption("LV " + vg.name + "/" + lv.name + ": " + why);
}

}  // namespace

bool IsServedMirroredLv(const LogicalVolume& lv) {
  if (lv.segments.size() != 1 || lv.HasStatus("PVMOVE")) return false;
  const Segment& s = lv.segments[0];
  return s.kept && s.start_extent == 0 && (s.type == "raid1" || s.type == "mirror");
}

bool MirroredHealth::degraded() const {
  return std::find(failed.begin(), failed.end(), true) != failed.end();
}

Result<MirroredLayout> MirroredLayoutOf(const VolumeGroup& vg, const LogicalVolume& lv) {
  if (!IsServedMirroredLv(lv)) return Bad(vg, lv, "not a raid1 or mirror LV");
  const Segment& seg = lv.segments[0];
  MirroredLayout l;
  l.region_sectors = static_cast<uint64_t>(std::max<int64_t>(IntItem(seg, "region_size", 0), 0));
  if (seg.type == "raid1") {
    const ConfigNode* raids = Item(seg, "raids");
    if (!raids || raids->values.empty() || raids->values.size() % 2) {
      return Bad(vg, lv, "'raids' is not pairs of sub-LVs");
    }
    for (size_t i = 0; i < raids->values.size(); i += 2) {
      l.metas.push_back(raids->values[i].text);
      l.images.push_back(raids->values[i + 1].text);
    }
    if (IntItem(seg, "device_count", -1) != static_cast<int64_t>(l.images.size())) {
      return Bad(vg, lv, "device_count does not match 'raids'");
    }
  } else {
    l.kind = MirroredDevice::Kind::kMirror;
    const ConfigNode* mirrors = Item(seg, "mirrors");
    if (!mirrors || mirrors->values.empty() || mirrors->values.size() % 2) {
      return Bad(vg, lv, "'mirrors' is not pairs");
    }
    for (size_t i = 0; i < mirrors->values.size(); i += 2) {
      const ConfigValue& le = mirrors->values[i + 1];
      if (le.type != ConfigValue::Type::kInt || le.integer != 0) {
        return Bad(vg, lv, "a mirror leg that does not start at its sub-LV's first extent");
      }
      l.images.push_back(mirrors->values[i].text);
    }
    if (IntItem(seg, "mirror_count", -1) != static_cast<int64_t>(l.images.size())) {
      return Bad(vg, lv, "mirror_count does not match 'mirrors'");
    }
    l.log = KeptString(seg, "mirror_log");
  }
  if (l.region_sectors == 0) return Bad(vg, lv, "no region_size");
  std::vector<std::string> all = l.images;
  all.insert(all.end(), l.metas.begin(), l.metas.end());
  if (!l.log.empty()) all.push_back(l.log);
  for (const auto& name : all) {
    const LogicalVolume* sub = vg.FindLv(name);
    if (!sub) return Bad(vg, lv, "sub-LV " + name + " is not in the VG");
    for (const auto& s : sub->segments) {
      if (s.kept) return Bad(vg, lv, "sub-LV " + name + " is not linear or striped");
    }
  }
  return l;
}

namespace {

// A sub-LV's device; nullptr when it lies on a missing PV.
Result<bdev::BlockDevicePtr> SubLv(const VolumeGroup& vg, const std::string& name,
                                   const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                   const LvActivation& activation) {
  LvActivation act = activation;
  act.partial = false;
  auto dev = LvDevice::Create(vg, name, pv_devs, act);
  if (!dev.ok()) {
    if (dev.status().IsNotFound()) return bdev::BlockDevicePtr();
    return dev.status();
  }
  return bdev::BlockDevicePtr(std::move(*dev));
}

}  // namespace

Result<bdev::BlockDevicePtr> ActivateMirroredLv(const VolumeGroup& vg, const LogicalVolume& lv,
                                                const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                                const LvActivation& activation,
                                                MirroredDevice::OpenReport* report) {
  VS_ASSIGN_OR_RETURN(MirroredLayout l, MirroredLayoutOf(vg, lv));
  MirroredDevice::Config c;
  c.kind = l.kind;
  c.name = vg.name + "/" + lv.name;
  c.size = uint64_t{lv.le_count()} * vg.extent_bytes();
  c.region_bytes = l.region_sectors * kSector;
  c.nosync = lv.HasStatus("NOTSYNCED");
  for (size_t i = 0; i < l.images.size(); i++) {
    MirroredDevice::Leg leg;
    leg.name = vg.name + "/" + l.images[i];
    leg.rebuild = vg.FindLv(l.images[i])->HasStatus("REBUILD");
    VS_ASSIGN_OR_RETURN(leg.data, SubLv(vg, l.images[i], pv_devs, activation));
    if (!l.metas.empty()) {
      VS_ASSIGN_OR_RETURN(leg.meta, SubLv(vg, l.metas[i], pv_devs, activation));
    }
    c.legs.push_back(std::move(leg));
  }
  if (!l.log.empty()) {
    VS_ASSIGN_OR_RETURN(c.log, SubLv(vg, l.log, pv_devs, activation));
    if (!c.log) {
      return Status::NotFound("LV " + c.name + ": its mirror log " + l.log +
                              " is on a missing PV; refusing to serve");
    }
  }
  VS_ASSIGN_OR_RETURN(auto dev, MirroredDevice::Open(std::move(c), report));
  return bdev::BlockDevicePtr(std::move(dev));
}

MirroredHealth ReadMirroredHealth(const VolumeGroup& vg, const LogicalVolume& lv,
                                  const std::vector<bdev::BlockDevicePtr>& pv_devs) {
  MirroredHealth h;
  auto l = MirroredLayoutOf(vg, lv);
  if (!l.ok()) return h;
  h.failed.assign(l->images.size(), false);
  std::optional<DmRaidSuperblock> fresh;
  std::vector<std::optional<DmRaidSuperblock>> sbs(l->images.size());
  std::vector<uint8_t> block(kDmRaidSuperblockBytes);
  LvActivation act;
  act.read_only = true;
  act.activations = std::make_shared<Activations>();  // not registered with any stack
  for (size_t i = 0; i < l->images.size(); i++) {
    auto data = SubLv(vg, l->images[i], pv_devs, act);
    if (!data.ok() || !*data) {
      h.failed[i] = true;
      continue;
    }
    if (l->metas.empty()) continue;
    auto meta = SubLv(vg, l->metas[i], pv_devs, act);
    if (!meta.ok() || !*meta || !(*meta)->Read(0, block).ok()) {
      h.failed[i] = true;
      continue;
    }
    auto sb = DecodeDmRaidSuperblock(block);
    if (!sb.ok()) continue;
    sbs[i] = *sb;
    if (!fresh || sb->events > fresh->events) fresh = *sb;
  }
  if (fresh) {
    h.superblocks = true;
    // A leg is failed when the newest superblock says so, or its own is older (stale).
    for (size_t i = 0; i < h.failed.size(); i++) {
      h.failed[i] = h.failed[i] || fresh->leg_failed(i) || !sbs[i] ||
                    sbs[i]->events < fresh->events || sbs[i]->disk_recovery_offset != kMaxSector;
    }
  }
  return h;
}

}  // namespace volstack::lvm
