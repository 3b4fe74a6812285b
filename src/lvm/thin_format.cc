#include "lvm/thin_format.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "util/all_zero.h"

namespace volstack::lvm {

namespace {

constexpr std::array<uint32_t, 256> MakeCrc32cTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = MakeCrc32cTable();

void EncodeSm(const ThinSpaceMapRoot& r, uint8_t* p) {
  EncodeLE64(p, r.nr_blocks);
  EncodeLE64(p + 8, r.nr_allocated);
  EncodeLE64(p + 16, r.bitmap_root);
  EncodeLE64(p + 24, r.ref_count_root);
}

ThinSpaceMapRoot DecodeSm(const uint8_t* p) {
  return {DecodeLE64(p), DecodeLE64(p + 8), DecodeLE64(p + 16), DecodeLE64(p + 24)};
}

}  // namespace

uint32_t Crc32cRaw(uint32_t seed, std::span<const uint8_t> data) {
  uint32_t c = seed;
  for (uint8_t b : data) c = kCrc32cTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c;
}

uint32_t ThinBlockCsum(std::span<const uint8_t> block, uint32_t xor_value) {
  return Crc32cRaw(~uint32_t{0}, block.subspan(4)) ^ xor_value;
}

Result<ThinSuperblock> DecodeThinSuperblock(std::span<const uint8_t> block) {
  if (block.size() < kThinBlockBytes) return Status::InvalidArgument("thin superblock: short");
  block = block.first(kThinBlockBytes);
  if (AllZero(block.data(), block.size()))
    return Status::NotFound("thin pool metadata: no superblock (all zero)");
  const uint8_t* p = block.data();
  if (DecodeLE64(p + 32) != kThinMagic) {
    return Status::Corruption("thin pool metadata: bad superblock magic");
  }
  if (DecodeLE32(p) != ThinBlockCsum(block, kThinSuperblockCsumXor)) {
    return Status::Corruption("thin pool metadata: superblock checksum mismatch");
  }
  if (DecodeLE64(p + 8) != 0) {
    return Status::Corruption("thin pool metadata: superblock says it is not block 0");
  }
  ThinSuperblock sb;
  sb.flags = DecodeLE32(p + 4);
  std::memcpy(sb.uuid, p + 16, 16);
  sb.version = DecodeLE32(p + 40);
  sb.time = DecodeLE32(p + 44);
  sb.trans_id = DecodeLE64(p + 48);
  sb.held_root = DecodeLE64(p + 56);
  sb.data_sm = DecodeSm(p + 64);
  sb.metadata_sm = DecodeSm(p + 192);
  sb.data_mapping_root = DecodeLE64(p + 320);
  sb.device_details_root = DecodeLE64(p + 328);
  sb.data_block_size = DecodeLE32(p + 336);
  sb.metadata_block_size = DecodeLE32(p + 340);
  sb.metadata_nr_blocks = DecodeLE64(p + 344);
  sb.compat_flags = DecodeLE32(p + 352);
  sb.compat_ro_flags = DecodeLE32(p + 356);
  sb.incompat_flags = DecodeLE32(p + 360);
  if (sb.version < 1 || sb.version > 2) {
    return Status::NotSupported("thin pool metadata: version " + std::to_string(sb.version));
  }
  if (sb.metadata_block_size != kThinBlockBytes / 512) {
    return Status::NotSupported("thin pool metadata: metadata block size " +
                                std::to_string(sb.metadata_block_size) + " sectors");
  }
  if (sb.incompat_flags != 0) {
    return Status::NotSupported("thin pool metadata: unknown incompatible features");
  }
  return sb;
}

void EncodeThinSuperblock(const ThinSuperblock& sb, std::span<uint8_t> block) {
  std::fill(block.begin(), block.begin() + kThinBlockBytes, 0);
  uint8_t* p = block.data();
  EncodeLE32(p + 4, sb.flags);
  std::memcpy(p + 16, sb.uuid, 16);
  EncodeLE64(p + 32, kThinMagic);
  EncodeLE32(p + 40, sb.version);
  EncodeLE32(p + 44, sb.time);
  EncodeLE64(p + 48, sb.trans_id);
  EncodeLE64(p + 56, sb.held_root);
  EncodeSm(sb.data_sm, p + 64);
  EncodeSm(sb.metadata_sm, p + 192);
  EncodeLE64(p + 320, sb.data_mapping_root);
  EncodeLE64(p + 328, sb.device_details_root);
  EncodeLE32(p + 336, sb.data_block_size);
  EncodeLE32(p + 340, sb.metadata_block_size);
  EncodeLE64(p + 344, sb.metadata_nr_blocks);
  EncodeLE32(p + 352, sb.compat_flags);
  EncodeLE32(p + 356, sb.compat_ro_flags);
  EncodeLE32(p + 360, sb.incompat_flags);
  EncodeLE32(p, ThinBlockCsum(block.first(kThinBlockBytes), kThinSuperblockCsumXor));
}

Result<BtreeNodeHeader> DecodeBtreeNode(std::span<const uint8_t> block, uint64_t blocknr,
                                        uint32_t leaf_value_size) {
  auto bad = [&](const std::string& why) {
    return Status::Corruption("thin pool metadata: btree node at block " + std::to_string(blocknr) +
                              ": " + why);
  };
  if (block.size() < kThinBlockBytes) return bad("short block");
  block = block.first(kThinBlockBytes);
  const uint8_t* p = block.data();
  if (DecodeLE32(p) != ThinBlockCsum(block, kBtreeCsumXor)) return bad("checksum mismatch");
  BtreeNodeHeader h;
  h.flags = DecodeLE32(p + 4);
  h.blocknr = DecodeLE64(p + 8);
  h.nr_entries = DecodeLE32(p + 16);
  h.max_entries = DecodeLE32(p + 20);
  h.value_size = DecodeLE32(p + 24);
  if (h.blocknr != blocknr) return bad("it says it is block " + std::to_string(h.blocknr));
  if ((h.flags & (kBtreeInternal | kBtreeLeaf)) == 0 ||
      (h.flags & (kBtreeInternal | kBtreeLeaf)) == (kBtreeInternal | kBtreeLeaf)) {
    return bad("neither internal nor leaf");
  }
  const uint32_t want = h.internal() ? 8 : leaf_value_size;
  if (h.value_size != want) {
    return bad("value size " + std::to_string(h.value_size) + ", expected " + std::to_string(want));
  }
  if (h.nr_entries > h.max_entries ||
      kBtreeHeaderBytes + uint64_t{h.max_entries} * (8 + h.value_size) > kThinBlockBytes) {
    return bad("entry counts do not fit the block");
  }
  for (uint32_t i = 1; i < h.nr_entries; i++) {
    if (BtreeKey(block, i - 1) >= BtreeKey(block, i)) return bad("keys out of order");
  }
  return h;
}

std::span<const uint8_t> BtreeValue(std::span<const uint8_t> block, const BtreeNodeHeader& h,
                                    uint32_t i) {
  const size_t off = kBtreeHeaderBytes + 8 * size_t{h.max_entries} + size_t{h.value_size} * i;
  return block.subspan(off, h.value_size);
}

void EncodeBtreeNode(std::span<uint8_t> block, uint64_t blocknr, bool internal,
                     std::span<const uint64_t> keys, std::span<const uint8_t> values,
                     uint32_t value_size) {
  std::fill(block.begin(), block.begin() + kThinBlockBytes, 0);
  uint32_t max = (kThinBlockBytes - kBtreeHeaderBytes) / (8 + value_size);
  max -= max % 3;
  uint8_t* p = block.data();
  EncodeLE32(p + 4, internal ? kBtreeInternal : kBtreeLeaf);
  EncodeLE64(p + 8, blocknr);
  EncodeLE32(p + 16, static_cast<uint32_t>(keys.size()));
  EncodeLE32(p + 20, max);
  EncodeLE32(p + 24, value_size);
  for (size_t i = 0; i < keys.size(); i++) EncodeLE64(p + kBtreeHeaderBytes + 8 * i, keys[i]);
  std::memcpy(p + kBtreeHeaderBytes + 8 * size_t{max}, values.data(), values.size());
  EncodeLE32(p, ThinBlockCsum(block.first(kThinBlockBytes), kBtreeCsumXor));
}

}  // namespace volstack::lvm
