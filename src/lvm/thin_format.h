// dm-thin's pool metadata (drivers/md/dm-thin-metadata.c and drivers/md/persistent-data/ in
// Linux; thin-provisioning-tools reads and writes the same bytes), as far as volstack reads it
// to serve thin LVs without device-mapper (docs/format/lvm2.md, "thin pools"). All integers
// little-endian; the metadata device (the pool's _tmeta sub-LV) is an array of 4 KiB blocks.
//
//  Superblock, block 0 (struct thin_disk_superblock):
//  +0   csum u32          +4   flags u32 (bit 0: needs_check)   +8  blocknr u64 (0)
//  +16  uuid[16]          +32  magic u64 (27022010)            +40 version u32 (1 or 2)
//  +44  time u32          +48  trans_id u64                     +56 held_root u64
//  +64  data_space_map_root[128]:     nr_blocks u64, nr_allocated u64, bitmap_root u64,
//                                     ref_count_root u64 (the rest zero)
//  +192 metadata_space_map_root[128]: the same four fields for the metadata blocks
//  +320 data_mapping_root u64         +328 device_details_root u64
//  +336 data_block_size u32 (sectors) +340 metadata_block_size u32 (sectors: 8)
//  +344 metadata_nr_blocks u64        +352 compat_flags u32 +356 compat_ro_flags u32
//  +360 incompat_flags u32
//
//  Btree node, any other block (struct btree_node):
//  +0  csum u32   +4 flags u32 (1 internal, 2 leaf)   +8 blocknr u64 (this block)
//  +16 nr_entries u32   +20 max_entries u32   +24 value_size u32   +28 padding u32
//  +32 keys u64[max_entries], then values[max_entries] of value_size bytes each.
//  An internal node's values are child block numbers (u64) and its keys the lowest key
//  of each child; a leaf's keys are sorted.
//
//  The mapping tree is two levels: the top tree maps a thin device id to the root of that
//  device's tree, which maps a virtual block to (data block << 24 | time), u64. The device
//  details tree maps the id to {mapped_blocks u64, transaction_id u64, creation_time u32,
//  snapshotted_time u32} (24 bytes).
//
//  Checksums: crc32c (Castagnoli, seed ~0, no final inversion, as Linux's crc32c()) of the
//  block from byte 4 to its end, xor a constant per block kind.
#pragma once

#include <cstdint>
#include <span>

#include "util/result.h"

namespace volstack::lvm {

inline constexpr uint32_t kThinBlockBytes = 4096;
inline constexpr uint64_t kThinMagic = 27022010;
inline constexpr uint32_t kThinSuperblockCsumXor = 160774;
inline constexpr uint32_t kBtreeCsumXor = 121107;
inline constexpr uint32_t kBitmapCsumXor = 240779;
inline constexpr uint32_t kIndexCsumXor = 160478;
inline constexpr uint32_t kBtreeInternal = 1;
inline constexpr uint32_t kBtreeLeaf = 2;
inline constexpr uint32_t kBtreeHeaderBytes = 32;
inline constexpr uint32_t kThinTimeBits = 24;
inline constexpr uint32_t kThinDeviceDetailsBytes = 24;

// Linux's crc32c(seed, data): the register without the final inversion.
uint32_t Crc32cRaw(uint32_t seed, std::span<const uint8_t> data);
// The checksum dm's block manager stores at byte 0 of a metadata block.
uint32_t ThinBlockCsum(std::span<const uint8_t> block, uint32_t xor_value);

struct ThinSpaceMapRoot {
  uint64_t nr_blocks = 0;
  uint64_t nr_allocated = 0;
  uint64_t bitmap_root = 0;
  uint64_t ref_count_root = 0;
};

struct ThinSuperblock {
  uint32_t flags = 0;
  uint8_t uuid[16] = {};
  uint32_t version = 2;
  uint32_t time = 0;
  uint64_t trans_id = 0;
  uint64_t held_root = 0;
  ThinSpaceMapRoot data_sm, metadata_sm;
  uint64_t data_mapping_root = 0;
  uint64_t device_details_root = 0;
  uint32_t data_block_size = 0;  // sectors
  uint32_t metadata_block_size = 8;
  uint64_t metadata_nr_blocks = 0;
  uint32_t compat_flags = 0, compat_ro_flags = 0, incompat_flags = 0;
};

// `block` is block 0 of the metadata device. NotFound when it is all zero (a pool lvm2 has
// made and no kernel has formatted); Corruption on a wrong magic, checksum or version.
Result<ThinSuperblock> DecodeThinSuperblock(std::span<const uint8_t> block);
// Fills `block` (kThinBlockBytes, zeroed first), checksum included.
void EncodeThinSuperblock(const ThinSuperblock& sb, std::span<uint8_t> block);

struct BtreeNodeHeader {
  uint32_t flags = 0;
  uint64_t blocknr = 0;
  uint32_t nr_entries = 0;
  uint32_t max_entries = 0;
  uint32_t value_size = 0;
  bool internal() const { return flags & kBtreeInternal; }
};

// Checks a btree node read from block `blocknr`: checksum, its own block number, entry
// counts that fit the block, the value size `value_size` for a leaf (8 for an internal
// node). Corruption naming the block otherwise.
Result<BtreeNodeHeader> DecodeBtreeNode(std::span<const uint8_t> block, uint64_t blocknr,
                                        uint32_t leaf_value_size);
inline uint64_t BtreeKey(std::span<const uint8_t> block, uint32_t i);
// Fills `block` (kThinBlockBytes, zeroed first) with a node at `blocknr` holding keys[i] ->
// values[i * value_size ...]; max_entries is as many as fit (rounded down to a multiple of 3,
// as persistent-data does). REQUIRES keys sorted, values.size() == keys.size() * value_size.
void EncodeBtreeNode(std::span<uint8_t> block, uint64_t blocknr, bool internal,
                     std::span<const uint64_t> keys, std::span<const uint8_t> values,
                     uint32_t value_size);
// The value bytes of entry i of a decoded node.
std::span<const uint8_t> BtreeValue(std::span<const uint8_t> block, const BtreeNodeHeader& h,
                                    uint32_t i);

}  // namespace volstack::lvm

#include "util/coding.h"

namespace volstack::lvm {
inline uint64_t BtreeKey(std::span<const uint8_t> block, uint32_t i) {
  return DecodeLE64(block.data() + kBtreeHeaderBytes + 8 * size_t{i});
}
}  // namespace volstack::lvm
