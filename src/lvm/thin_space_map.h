// persistent-data's space maps as dm-thin keeps them (thin_format.h): reference counts of
// the pool's data blocks and of its own metadata blocks.
//
//  Bitmap block: +0 csum u32 (xor kBitmapCsumXor), +4 not_used u32, +8 blocknr u64, then
//  kSmEntriesPerBitmap 2-bit counts; entry e is bits 2e (high) and 2e+1 (low) of the
//  little-endian bit string. 0, 1, 2 are counts; 3 means "more, see the ref_count tree"
//  (a btree: block -> u32 count).
//  Index entry (16 bytes): blocknr u64 (the bitmap), nr_free u32 (zero entries in that
//  bitmap, counting only blocks that exist), none_free_before u32 (its first zero entry).
//  Data space map: bitmap_root is a btree: bitmap index -> index entry.
//  Metadata space map: bitmap_root is one index block: +0 csum u32 (xor kIndexCsumXor),
//  +4 padding u32, +8 blocknr u64, +16 kSmMaxMetadataBitmaps index entries.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bdev/block_device.h"
#include "lvm/thin_format.h"

namespace volstack::lvm {

inline constexpr uint32_t kSmBitmapHeaderBytes = 16;
inline constexpr uint32_t kSmEntriesPerBitmap = (kThinBlockBytes - kSmBitmapHeaderBytes) * 4;
inline constexpr uint32_t kSmIndexEntryBytes = 16;
inline constexpr uint32_t kSmMaxMetadataBitmaps = 255;

// Fills `block` with a bitmap at `blocknr` holding counts[i] (capped at 3) for its entries;
// entries past counts.size() are 0. Returns the index entry's nr_free and none_free_before.
struct SmIndexEntry {
  uint64_t blocknr = 0;
  uint32_t nr_free = 0;
  uint32_t none_free_before = 0;
};
SmIndexEntry EncodeSmBitmap(std::span<uint8_t> block, uint64_t blocknr,
                            std::span<const uint32_t> counts);
// The count of entry e of a checked bitmap block (0..3).
uint32_t SmBitmapEntry(std::span<const uint8_t> block, uint32_t e);
void EncodeSmIndexEntry(const SmIndexEntry& e, uint8_t* p);
SmIndexEntry DecodeSmIndexEntry(const uint8_t* p);

// Which metadata blocks the committed transaction uses: the metadata space map's counts
// (non-zero = used), one per metadata block. Corruption when its index or bitmaps are bad.
Result<std::vector<bool>> ReadMetadataUsed(const bdev::BlockDevicePtr& meta,
                                           const ThinSuperblock& sb);

}  // namespace volstack::lvm
