#include "pool/mos_format.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "util/coding.h"

namespace volstack::pool {

std::vector<uint8_t> EncodeMos(const MosPhys& mos) {
  nlohmann::json j;
  j["props"] = mos.props;
  j["next_id"] = mos.next_id;
  j["nsm"] = mos.space_map.size();
  nlohmann::json ds = nlohmann::json::array();
  std::vector<const BlockPtr*> bps;
  for (const auto& d : mos.datasets) {
    nlohmann::json e;
    e["id"] = d.id;
    e["name"] = d.name;
    e["guid"] = d.guid;
    e["create_txg"] = d.create_txg;
    e["volsize"] = d.volsize;
    e["volblocksize"] = d.volblocksize;
    e["levels"] = d.levels;
    e["used"] = d.used;
    if (mos.compressed) e["lused"] = d.lused;
    e["props"] = d.props;
    e["root"] = bps.size();
    if (!d.zil.empty()) {
      e["zil"] = {{"guid", d.zil.guid},          {"seq", d.zil.seq},
                  {"vdev", d.zil.head.vdev},     {"asize", d.zil.head.asize_sectors},
                  {"offset", d.zil.head.offset}, {"floor", d.zil.floor}};
    }
    if (!d.origin.empty()) e["origin"] = d.origin;
    bps.push_back(&d.root);
    ds.push_back(std::move(e));
  }
  j["datasets"] = std::move(ds);
  if (mos.compressed) j["compressed"] = true;
  for (const auto& bp : mos.space_map) bps.push_back(&bp);
  if (!mos.deferred.empty()) {
    nlohmann::json defer = nlohmann::json::array();
    for (const auto& l : mos.deferred) {
      defer.push_back({{"txg", l.txg}, {"nbp", l.blocks.size()}});
      for (const auto& bp : l.blocks) bps.push_back(&bp);
    }
    j["defer"] = std::move(defer);
  }
  const std::string text = j.dump();
  std::vector<uint8_t> out(24 + bps.size() * kBlkptrSize + text.size(), 0);
  const bool v3 = std::any_of(mos.datasets.begin(), mos.datasets.end(),
                              [](const auto& d) { return d.is_snapshot() || !d.origin.empty(); });
  const bool v4 = std::any_of(mos.datasets.begin(), mos.datasets.end(), [](const auto& d) {
    return d.props.count("resume:toguid") > 0;  // a resumable partial receive (receive.cc)
  });
  // Stamped log chains (version 8); a plain one, left by an older volstack and still being
  // replayed, keeps the MOS below 8. Chains of both formats never meet in one MOS: new
  // chains start only after the import's replay is done.
  const bool v8 = std::any_of(mos.datasets.begin(), mos.datasets.end(), [](const auto& d) {
    return !d.zil.empty() && d.zil.format == kZilFormatStamped;
  });
  VS_CHECK(!v8 || std::none_of(mos.datasets.begin(), mos.datasets.end(), [](const auto& d) {
    return !d.zil.empty() && d.zil.format == kZilFormatPlain;
  }));
  // The version written is the highest one an active feature needs (mos_format.h).
  EncodeLE64(out.data(), v8                      ? kMosMagicV8
                         : !mos.deferred.empty() ? kMosMagicV6
                         : mos.compressed        ? kMosMagicV5
                         : v4                    ? kMosMagicV4
                         : v3                    ? kMosMagic
                                                 : kMosMagicV2);
  EncodeLE64(out.data() + 8, mos.txg);
  EncodeLE32(out.data() + 16, static_cast<uint32_t>(bps.size()));
  EncodeLE32(out.data() + 20, static_cast<uint32_t>(text.size()));
  for (size_t i = 0; i < bps.size(); i++) EncodeBlockPtr(*bps[i], out.data() + 24 + i * 128);
  std::memcpy(out.data() + 24 + bps.size() * kBlkptrSize, text.data(), text.size());
  return out;
}

Result<MosPhys> DecodeMos(std::span<const uint8_t> block) {
  auto bad = [](const std::string& why) { return Status::Corruption("MOS: " + why); };
  if (block.size() < 24) return bad("truncated");
  if (DecodeLE64(block.data()) == kMosMagicV1) {
    return bad(
        "format version 1 (a pool made by an older volstack, before the intent log) is not "
        "supported by this volstack, which reads version 2; recreate the pool");
  }
  const uint64_t magic = DecodeLE64(block.data());
  if (magic != kMosMagicV8 && magic != kMosMagicV6 && magic != kMosMagicV5 &&
      magic != kMosMagicV4 && magic != kMosMagic && magic != kMosMagicV2) {
    return bad("no magic");
  }
  MosPhys mos;
  mos.txg = DecodeLE64(block.data() + 8);
  const uint64_t nbp = DecodeLE32(block.data() + 16);
  const uint64_t len = DecodeLE32(block.data() + 20);
  if (24 + nbp * kBlkptrSize + len > block.size()) return bad("lengths past the block");
  std::vector<BlockPtr> bps;
  for (uint64_t i = 0; i < nbp; i++) {
    VS_ASSIGN_OR_RETURN(auto bp, DecodeBlockPtr(block.subspan(24 + i * kBlkptrSize)));
    bps.push_back(bp);
  }
  const uint8_t* t = block.data() + 24 + nbp * kBlkptrSize;
  const auto j = nlohmann::json::parse(t, t + len, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad("directory is not JSON");
  try {
    mos.props = j.at("props").get<std::map<std::string, std::string>>();
    mos.next_id = j.at("next_id").get<uint64_t>();
    const uint64_t nsm = j.at("nsm").get<uint64_t>();
    if (nsm > nbp) return bad("pointer count mismatch");
    mos.compressed = j.contains("compressed") && j.at("compressed").get<bool>();
    const bool v6_or_later = magic == kMosMagicV6 || magic == kMosMagicV8;
    if (!v6_or_later && mos.compressed != (magic == kMosMagicV5)) {
      return bad("compressed blocks and format version disagree");
    }
    uint64_t ndefer = 0;
    if (j.contains("defer")) {
      const auto& defer = j.at("defer");
      if (!defer.is_array() || defer.empty()) return bad("defer is not a list");
      for (const auto& l : defer) {
        DeferListPhys d;
        d.txg = l.at("txg").get<uint64_t>();
        const uint64_t k = l.at("nbp").get<uint64_t>();
        if (k == 0 || k > nbp || d.txg > mos.txg ||
            (!mos.deferred.empty() && d.txg <= mos.deferred.back().txg)) {
          return bad("deferred frees list");
        }
        d.blocks.resize(k);  // filled from the pointers below
        ndefer += k;
        mos.deferred.push_back(std::move(d));
      }
    }
    if (magic == kMosMagicV6 ? mos.deferred.empty() : !v6_or_later && !mos.deferred.empty()) {
      return bad("deferred frees and format version disagree");
    }
    const auto& ds = j.at("datasets");
    if (!ds.is_array()) return bad("datasets is not a list");
    if (ds.size() + nsm + ndefer != nbp) return bad("pointer count mismatch");
    for (const auto& e : ds) {
      DatasetPhys d;
      d.id = e.at("id").get<uint64_t>();
      d.name = e.at("name").get<std::string>();
      d.guid = e.at("guid").get<uint64_t>();
      d.create_txg = e.at("create_txg").get<uint64_t>();
      d.volsize = e.at("volsize").get<uint64_t>();
      d.volblocksize = e.at("volblocksize").get<uint32_t>();
      d.levels = e.at("levels").get<uint32_t>();
      d.used = e.at("used").get<uint64_t>();
      d.lused = mos.compressed ? e.at("lused").get<uint64_t>() : d.used;
      d.props = e.at("props").get<std::map<std::string, std::string>>();
      const uint64_t root = e.at("root").get<uint64_t>();
      if (root >= ds.size()) return bad("root index out of range");
      d.root = bps[root];
      if (e.contains("zil")) {
        const auto& z = e.at("zil");
        d.zil.guid = z.at("guid").get<uint64_t>();
        d.zil.seq = z.at("seq").get<uint64_t>();
        d.zil.head.vdev = z.at("vdev").get<uint32_t>();
        d.zil.head.asize_sectors = z.at("asize").get<uint32_t>();
        d.zil.head.offset = z.at("offset").get<uint64_t>();
        d.zil.floor = z.at("floor").get<uint64_t>();
        d.zil.format = magic == kMosMagicV8 ? kZilFormatStamped : kZilFormatPlain;
        if (d.zil.guid == 0 || d.zil.head.empty() || d.zil.head.asize() > kZilMaxBlock) {
          return bad("intent log header");
        }
      }
      if (e.contains("origin")) d.origin = e.at("origin").get<std::string>();
      if (magic == kMosMagicV2 && (d.is_snapshot() || !d.origin.empty())) {
        return bad("a snapshot or clone in a version-2 directory");
      }
      const uint32_t vbs = d.volblocksize;
      if (vbs < 512 || vbs > (128u << 10) || (vbs & (vbs - 1)) != 0) return bad("volblocksize");
      if (d.volsize % vbs != 0) return bad("volsize not a multiple of volblocksize");
      if (d.levels < 1 || d.levels > 8) return bad("levels");
      if (!d.root.IsHole() &&
          (d.root.type != BlockType::kVolIndirect || d.root.level != d.levels)) {
        return bad("dataset root pointer");
      }
      mos.datasets.push_back(std::move(d));
    }
    for (uint64_t i = ds.size(); i < ds.size() + nsm; i++) {
      if (bps[i].IsHole() || bps[i].type != BlockType::kSpaceMap) return bad("space map pointer");
      mos.space_map.push_back(bps[i]);
    }
    uint64_t i = ds.size() + nsm;
    for (auto& l : mos.deferred) {
      for (auto& bp : l.blocks) {
        if (bps[i].IsHole() || bps[i].type != BlockType::kSpaceMap) {
          return bad("deferred frees pointer");
        }
        bp = bps[i++];
      }
    }
  } catch (const std::exception& e) {
    return bad(std::string("bad directory: ") + e.what());
  }
  return mos;
}

std::vector<uint8_t> EncodeSpaceMapBlock(std::span<const SpaceMapEntry> entries) {
  VS_CHECK_OP(entries.size(), <=, kSpaceMapEntriesPerBlock);
  std::vector<uint8_t> out(16 + 16 * entries.size());
  EncodeLE64(out.data(), kSpaceMapMagic);
  EncodeLE64(out.data() + 8, entries.size());
  uint8_t* p = out.data() + 16;
  for (const auto& e : entries) {
    VS_CHECK_OP(e.length, <, uint64_t{1} << 48);
    VS_CHECK_OP(e.vdev, <, 1u << 16);
    EncodeLE64(p, e.offset | (e.free ? (uint64_t{1} << 63) : 0));
    EncodeLE64(p + 8, (uint64_t{e.vdev} << 48) | e.length);
    p += 16;
  }
  return out;
}

Result<std::vector<SpaceMapEntry>> DecodeSpaceMapBlock(std::span<const uint8_t> block) {
  if (block.size() < 16) return Status::Corruption("space map: truncated");
  if (DecodeLE64(block.data()) != kSpaceMapMagic) return Status::Corruption("space map: magic");
  const uint64_t count = DecodeLE64(block.data() + 8);
  if (count > (block.size() - 16) / 16) return Status::Corruption("space map: count");
  std::vector<SpaceMapEntry> out;
  out.reserve(count);
  const uint8_t* p = block.data() + 16;
  for (uint64_t i = 0; i < count; i++, p += 16) {
    const uint64_t w0 = DecodeLE64(p), w1 = DecodeLE64(p + 8);
    SpaceMapEntry e;
    e.free = (w0 >> 63) != 0;
    e.offset = w0 & ~(uint64_t{1} << 63);
    e.vdev = static_cast<uint32_t>(w1 >> 48);
    e.length = w1 & ((uint64_t{1} << 48) - 1);
    if (e.length == 0) return Status::Corruption("space map: empty record");
    out.push_back(e);
  }
  return out;
}

}  // namespace volstack::pool
