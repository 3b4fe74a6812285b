#include "pool/label_format.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/coding.h"

namespace volstack::pool {

uint64_t LabelOffset(uint64_t device_size, int index) {
  const uint64_t s = device_size / kLabelSize * kLabelSize;
  switch (index) {
    case 0:
      return 0;
    case 1:
      return kLabelSize;
    case 2:
      return s - 2 * kLabelSize;
    default:
      return s - kLabelSize;
  }
}

uint64_t AllocEnd(uint64_t device_size) { return LabelOffset(device_size, 2); }

std::string PoolStateName(PoolState s) {
  switch (s) {
    case PoolState::kActive:
      return "ACTIVE";
    case PoolState::kExported:
      return "EXPORTED";
    default:
      return "DESTROYED";
  }
}

namespace {
void Seal(std::vector<uint8_t>& buf, uint64_t device_offset) {
  const size_t n = buf.size();
  EncodeLE64(buf.data() + n - 40, kEckMagic);
  const Checksum c =
      ComputeEmbeddedChecksum(std::span<const uint8_t>(buf.data(), n - 40), device_offset);
  std::memcpy(buf.data() + n - 32, c.bytes.data(), 32);
}

Status Verify(std::span<const uint8_t> buf, uint64_t device_offset, const char* what) {
  const size_t n = buf.size();
  if (DecodeLE64(buf.data() + n - 40) != kEckMagic) {
    return Status::Corruption(std::string(what) + ": no embedded checksum");
  }
  const Checksum c = ComputeEmbeddedChecksum(buf.subspan(0, n - 40), device_offset);
  if (std::memcmp(c.bytes.data(), buf.data() + n - 32, 32) != 0) {
    return Status::Corruption(std::string(what) + ": checksum mismatch");
  }
  return Status::Ok();
}
}  // namespace

std::vector<uint8_t> EncodeLabelConfig(const LabelConfig& c, uint64_t device_offset) {
  nlohmann::json j;
  j["name"] = c.name;
  j["state"] = static_cast<int>(c.state);
  j["pool_guid"] = c.pool_guid;
  j["vdev_guid"] = c.vdev_guid;
  j["vdev_id"] = c.vdev_id;
  j["vdev_guids"] = c.vdev_guids;
  j["ashift"] = c.ashift;
  j["txg"] = c.txg;
  j["version"] = c.version;
  if (c.vdev_size != 0) j["vdev_size"] = c.vdev_size;
  if (c.has_children()) {
    j["type"] = c.is_raidz() ? "raidz" : "mirror";
    if (c.is_raidz()) {
      j["nparity"] = c.nparity;
      j["sector"] = c.sector;
    }
    j["leaf_guid"] = c.leaf_guid;
    j["alloc_end"] = c.alloc_end;
    j["children"] = nlohmann::json::array();
    for (const auto& ch : c.children) {
      nlohmann::json e = {{"guid", ch.guid}, {"path", ch.path}};
      if (ch.offline) e["offline"] = true;
      j["children"].push_back(e);
    }
  }
  const std::string text = j.dump();
  std::vector<uint8_t> buf(kLabelConfigSize, 0);
  VS_CHECK_OP(text.size(), <=, kLabelConfigSize - 64);
  EncodeLE64(buf.data(), kLabelMagic);
  EncodeLE64(buf.data() + 8, c.is_raidz()    ? kRaidzLabelVersion
                             : c.is_mirror() ? kMirrorLabelVersion
                                             : kFormatVersion);
  EncodeLE64(buf.data() + 16, text.size());
  std::memcpy(buf.data() + 24, text.data(), text.size());
  Seal(buf, device_offset);
  return buf;
}

Result<LabelConfig> DecodeLabelConfig(std::span<const uint8_t> region, uint64_t device_offset) {
  if (region.size() != kLabelConfigSize) return Status::Corruption("label: wrong size");
  if (DecodeLE64(region.data()) != kLabelMagic) return Status::Corruption("label: no magic");
  VS_RETURN_IF_ERROR(Verify(region, device_offset, "label"));
  const uint64_t label_version = DecodeLE64(region.data() + 8);
  if (label_version != kFormatVersion && label_version != kMirrorLabelVersion &&
      label_version != kRaidzLabelVersion) {
    return Status::Corruption("label: unsupported version");
  }
  const uint64_t len = DecodeLE64(region.data() + 16);
  if (len > kLabelConfigSize - 64) return Status::Corruption("label: config length");
  const auto j = nlohmann::json::parse(region.begin() + 24, region.begin() + 24 + len, nullptr,
                                       /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::Corruption("label: config is not JSON");
  LabelConfig c;
  try {
    c.name = j.at("name").get<std::string>();
    const int state = j.at("state").get<int>();
    if (state < 0 || state > 2) return Status::Corruption("label: bad state");
    c.state = static_cast<PoolState>(state);
    c.pool_guid = j.at("pool_guid").get<uint64_t>();
    c.vdev_guid = j.at("vdev_guid").get<uint64_t>();
    c.vdev_id = j.at("vdev_id").get<uint32_t>();
    c.vdev_guids = j.at("vdev_guids").get<std::vector<uint64_t>>();
    c.ashift = j.at("ashift").get<uint32_t>();
    c.txg = j.at("txg").get<uint64_t>();
    c.version = j.at("version").get<uint64_t>();
    if (j.contains("vdev_size")) c.vdev_size = j.at("vdev_size").get<uint64_t>();
    if (label_version == kMirrorLabelVersion || label_version == kRaidzLabelVersion) {
      const bool raidz = label_version == kRaidzLabelVersion;
      if (j.at("type").get<std::string>() != (raidz ? "raidz" : "mirror")) {
        return Status::Corruption("label: unknown vdev type");
      }
      if (raidz) {
        c.nparity = j.at("nparity").get<uint32_t>();
        c.sector = j.at("sector").get<uint32_t>();
      }
      c.leaf_guid = j.at("leaf_guid").get<uint64_t>();
      c.alloc_end = j.at("alloc_end").get<uint64_t>();
      for (const auto& ch : j.at("children")) {
        c.children.push_back({ch.at("guid").get<uint64_t>(), ch.at("path").get<std::string>(),
                              ch.contains("offline") && ch.at("offline").get<bool>()});
      }
    }
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("label: bad config: ") + e.what());
  }
  if (c.vdev_id >= c.vdev_guids.size() || c.vdev_guids[c.vdev_id] != c.vdev_guid) {
    return Status::Corruption("label: vdev id/guid inconsistent");
  }
  if (c.ashift < 9 || c.ashift > 16) return Status::Corruption("label: bad ashift");
  if (label_version == kRaidzLabelVersion) {
    const uint32_t s = c.sector;
    if (c.nparity < 1 || c.nparity > 2 || c.children.size() < c.nparity + 1 || s < 512 ||
        s > 65536 || (s & (s - 1)) != 0 || s > (1u << c.ashift) || c.alloc_end <= kAllocStart) {
      return Status::Corruption("label: raidz geometry inconsistent");
    }
  }
  if (label_version == kMirrorLabelVersion || label_version == kRaidzLabelVersion) {
    const bool listed =
        std::any_of(c.children.begin(), c.children.end(),
                    [&](const LabelConfig::Child& ch) { return ch.guid == c.leaf_guid; });
    if (c.children.empty() || c.children.size() > 16 || !listed || c.leaf_guid == 0) {
      return Status::Corruption("label: mirror children inconsistent");
    }
  }
  return c;
}

std::vector<uint8_t> EncodeUberblock(const Uberblock& ub, uint64_t device_offset) {
  std::vector<uint8_t> buf(kUberSlotSize, 0);
  uint8_t* p = buf.data();
  EncodeLE64(p, kUberblockMagic);
  EncodeLE64(p + 8, ub.version);
  EncodeLE64(p + 16, ub.txg);
  EncodeLE64(p + 24, ub.guid_sum);
  EncodeLE64(p + 32, ub.timestamp);
  EncodeLE64(p + 40, ub.pool_guid);
  EncodeBlockPtr(ub.rootbp, p + 48);
  EncodeLE64(p + 176, ub.vdev_count);
  Seal(buf, device_offset);
  return buf;
}

Result<Uberblock> DecodeUberblock(std::span<const uint8_t> slot, uint64_t device_offset) {
  if (slot.size() != kUberSlotSize) return Status::Corruption("uberblock: wrong size");
  const uint8_t* p = slot.data();
  if (DecodeLE64(p) != kUberblockMagic) return Status::Corruption("uberblock: no magic");
  VS_RETURN_IF_ERROR(Verify(slot, device_offset, "uberblock"));
  Uberblock ub;
  ub.version = DecodeLE64(p + 8);
  if (ub.version != kFormatVersion) return Status::Corruption("uberblock: unsupported version");
  ub.txg = DecodeLE64(p + 16);
  ub.guid_sum = DecodeLE64(p + 24);
  ub.timestamp = DecodeLE64(p + 32);
  ub.pool_guid = DecodeLE64(p + 40);
  VS_ASSIGN_OR_RETURN(ub.rootbp, DecodeBlockPtr(slot.subspan(48, kBlkptrSize)));
  ub.vdev_count = DecodeLE64(p + 176);
  if (DecodeLE64(p + 184) != 0) return Status::Corruption("uberblock: unknown flags");
  if (ub.txg == 0 || ub.rootbp.IsHole() || ub.rootbp.type != BlockType::kMos) {
    return Status::Corruption("uberblock: no MOS root");
  }
  return ub;
}

}  // namespace volstack::pool
