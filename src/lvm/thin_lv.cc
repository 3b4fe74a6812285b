#include "lvm/thin_lv.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "lvm/activations.h"
#include "lvm/kept_lvs.h"
#include "lvm/thin_btree.h"
#include "lvm/thin_device.h"
#include "util/coding.h"

namespace volstack::lvm {

namespace {

// A non-negative integer item of a kept segment, or -1.
int64_t IntItem(const Segment& seg, std::string_view key) {
  for (const auto& item : seg.kept_items) {
    if (item.key != key || item.is_section || item.is_array || item.values.size() != 1) continue;
    if (item.values[0].type != ConfigValue::Type::kInt || item.values[0].integer < 0) return -1;
    return item.values[0].integer;
  }
  return -1;
}

Status Bad(const VolumeGroup& vg, const LogicalVolume& lv, const std::string& why) {
  return Status::Corruption("LV " + vg.name + "/" + lv.name + ": " + why + "; not activated");
}

}  // namespace

bool IsServedThinLv(const LogicalVolume& lv) {
  if (lv.segments.size() != 1) return false;
  const Segment& s = lv.segments[0];
  return s.kept && s.start_extent == 0 && s.type == "thin" &&
         KeptString(s, "external_origin").empty();
}

Result<ThinLayout> ThinLayoutOf(const VolumeGroup& vg, const LogicalVolume& lv) {
  if (!IsServedThinLv(lv)) return Bad(vg, lv, "not a thin LV");
  const Segment& seg = lv.segments[0];
  ThinLayout l;
  l.pool = KeptString(seg, "thin_pool");
  const int64_t id = IntItem(seg, "device_id");
  if (l.pool.empty() || id < 0) return Bad(vg, lv, "no thin_pool or device_id");
  l.device_id = static_cast<uint64_t>(id);
  const LogicalVolume* pool = vg.FindLv(l.pool);
  if (!pool || pool->segments.size() != 1 || !pool->segments[0].kept ||
      pool->segments[0].type != "thin-pool") {
    return Bad(vg, lv, "its pool " + l.pool + " is not a thin-pool LV of the VG");
  }
  const Segment& ps = pool->segments[0];
  l.tmeta = KeptString(ps, "metadata");
  l.tdata = KeptString(ps, "pool");
  const int64_t chunk = IntItem(ps, "chunk_size");
  const int64_t trans = IntItem(ps, "transaction_id");
  if (l.tmeta.empty() || l.tdata.empty() || chunk <= 0 || trans < 0) {
    return Bad(vg, lv,
               "its pool " + l.pool + " lacks metadata, pool, chunk_size or transaction_id");
  }
  l.chunk_sectors = static_cast<uint64_t>(chunk);
  l.transaction_id = static_cast<uint64_t>(trans);
  for (const auto& name : {l.tmeta, l.tdata}) {
    const LogicalVolume* sub = vg.FindLv(name);
    if (!sub) return Bad(vg, lv, "pool sub-LV " + name + " is not in the VG");
    for (const auto& s : sub->segments) {
      if (s.kept) return Bad(vg, lv, "pool sub-LV " + name + " is not linear or striped");
    }
  }
  return l;
}

namespace {

// The pools open in this process, so every thin LV of a pool shares one (thin_pool.h: the
// pool must be the only writer of its metadata). Keyed by VG and pool UUID, the PV devices
// (another set of devices is another pool) and writability.
std::mutex pools_mu;
std::map<std::string, std::weak_ptr<ThinPool>> pools;  // GUARDED_BY(pools_mu)

}  // namespace

Result<bdev::BlockDevicePtr> ActivateThinLv(const VolumeGroup& vg, const LogicalVolume& lv,
                                            const std::vector<bdev::BlockDevicePtr>& pv_devs,
                                            const LvActivation& activation) {
  VS_ASSIGN_OR_RETURN(ThinLayout l, ThinLayoutOf(vg, lv));
  LvActivation act = activation;
  act.partial = false;
  const std::string name = vg.name + "/" + lv.name;
  std::string key = vg.id + "/" + vg.FindLv(l.pool)->id + (act.read_only ? "/ro" : "/rw");
  for (const auto& d : pv_devs) key += "/" + std::to_string(reinterpret_cast<uintptr_t>(d.get()));
  std::shared_ptr<ThinPool> pool;
  {
    std::lock_guard lock(pools_mu);
    std::erase_if(pools, [](const auto& e) { return e.second.expired(); });
    if (auto it = pools.find(key); it != pools.end()) pool = it->second.lock();
    if (!pool) {
      ThinPool::Config c;
      c.name = vg.name + "/" + l.pool;
      c.chunk_sectors = l.chunk_sectors;
      c.transaction_id = l.transaction_id;
      VS_ASSIGN_OR_RETURN(auto meta, LvDevice::Create(vg, l.tmeta, pv_devs, act));
      VS_ASSIGN_OR_RETURN(auto data, LvDevice::Create(vg, l.tdata, pv_devs, act));
      c.meta = std::move(meta);
      c.data = std::move(data);
      auto opened = ThinPool::Open(std::move(c));
      if (!opened.ok()) return opened.status().WithContext("LV " + name + ": not activated");
      pool = *opened;
      pools[key] = pool;
    }
  }
  VS_ASSIGN_OR_RETURN(auto dev,
                      ThinDevice::Open(pool, l.device_id, name,
                                       uint64_t{lv.le_count()} * vg.extent_bytes(), act.read_only));
  return bdev::BlockDevicePtr(std::move(dev));
}

std::optional<double> ThinDataPercent(const VolumeGroup& vg, const LogicalVolume& lv,
                                      const std::vector<bdev::BlockDevicePtr>& pv_devs) {
  auto l = ThinLayoutOf(vg, lv);
  if (!l.ok()) return std::nullopt;
  LvActivation act;
  act.read_only = true;
  act.activations = std::make_shared<Activations>();  // not registered with any stack
  auto meta = LvDevice::Create(vg, l->tmeta, pv_devs, act);
  if (!meta.ok()) return std::nullopt;
  std::vector<uint8_t> block(kThinBlockBytes);
  if (!(*meta)->Read(0, block).ok()) return std::nullopt;
  auto sb = DecodeThinSuperblock(block);
  if (!sb.ok()) return std::nullopt;
  ThinBtreeReader tree(
      *meta, std::min<uint64_t>(sb->metadata_nr_blocks, (*meta)->size() / kThinBlockBytes));
  auto details = tree.Lookup(sb->device_details_root, l->device_id, kThinDeviceDetailsBytes);
  const uint64_t size = uint64_t{lv.le_count()} * vg.extent_bytes();
  if (!details.ok() || !*details || size == 0) return std::nullopt;
  const double mapped = static_cast<double>(DecodeLE64((*details)->data()));
  return std::min(100.0, 100.0 * mapped * static_cast<double>(sb->data_block_size) * 512 /
                             static_cast<double>(size));
}

}  // namespace volstack::lvm
