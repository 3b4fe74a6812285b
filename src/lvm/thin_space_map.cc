#include "lvm/thin_space_map.h"

#include <algorithm>
#include <string>

#include "util/coding.h"

namespace volstack::lvm {

SmIndexEntry EncodeSmBitmap(std::span<uint8_t> block, uint64_t blocknr,
                            std::span<const uint32_t> counts) {
  std::fill(block.begin(), block.begin() + kThinBlockBytes, 0);
  uint8_t* bits = block.data() + kSmBitmapHeaderBytes;
  SmIndexEntry e;
  e.blocknr = blocknr;
  bool seen_free = false;
  // Only entries for blocks that exist count as free (thin_restore and the kernel agree).
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(counts.size(), kSmEntriesPerBitmap));
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t c = std::min<uint32_t>(counts[i], 3);
    if (c == 0) {
      e.nr_free++;
      if (!seen_free) e.none_free_before = i;
      seen_free = true;
      continue;
    }
    const uint32_t hi = 2 * i, lo = 2 * i + 1;
    if (c & 2) bits[hi / 8] |= uint8_t(1u << (hi % 8));
    if (c & 1) bits[lo / 8] |= uint8_t(1u << (lo % 8));
  }
  if (!seen_free) e.none_free_before = n;
  EncodeLE64(block.data() + 8, blocknr);
  EncodeLE32(block.data(), ThinBlockCsum(block.first(kThinBlockBytes), kBitmapCsumXor));
  return e;
}

uint32_t SmBitmapEntry(std::span<const uint8_t> block, uint32_t e) {
  const uint8_t* bits = block.data() + kSmBitmapHeaderBytes;
  const uint32_t hi = 2 * e, lo = 2 * e + 1;
  return ((bits[hi / 8] >> (hi % 8)) & 1) << 1 | ((bits[lo / 8] >> (lo % 8)) & 1);
}

void EncodeSmIndexEntry(const SmIndexEntry& e, uint8_t* p) {
  EncodeLE64(p, e.blocknr);
  EncodeLE32(p + 8, e.nr_free);
  EncodeLE32(p + 12, e.none_free_before);
}

SmIndexEntry DecodeSmIndexEntry(const uint8_t* p) {
  return {DecodeLE64(p), DecodeLE32(p + 8), DecodeLE32(p + 12)};
}

Result<std::vector<bool>> ReadMetadataUsed(const bdev::BlockDevicePtr& meta,
                                           const ThinSuperblock& sb) {
  const uint64_t n = sb.metadata_sm.nr_blocks;
  auto bad = [](const std::string& why) {
    return Status::Corruption("thin pool metadata space map: " + why);
  };
  if (n == 0 || n > sb.metadata_nr_blocks) return bad("block count disagrees with superblock");
  const uint64_t bitmaps = (n + kSmEntriesPerBitmap - 1) / kSmEntriesPerBitmap;
  if (bitmaps > kSmMaxMetadataBitmaps) return bad("too many bitmaps");
  std::vector<uint8_t> index(kThinBlockBytes), bm(kThinBlockBytes);
  const uint64_t ib = sb.metadata_sm.bitmap_root;
  if (ib == 0 || ib >= n) return bad("index block outside the metadata");
  VS_RETURN_IF_ERROR(meta->Read(ib * kThinBlockBytes, index));
  if (DecodeLE32(index.data()) != ThinBlockCsum(index, kIndexCsumXor) ||
      DecodeLE64(index.data() + 8) != ib) {
    return bad("index block " + std::to_string(ib) + " fails its checksum");
  }
  std::vector<bool> used(n, false);
  for (uint64_t b = 0; b < bitmaps; b++) {
    const SmIndexEntry e = DecodeSmIndexEntry(index.data() + 16 + kSmIndexEntryBytes * b);
    if (e.blocknr == 0 || e.blocknr >= n) return bad("bitmap outside the metadata");
    VS_RETURN_IF_ERROR(meta->Read(e.blocknr * kThinBlockBytes, bm));
    if (DecodeLE32(bm.data()) != ThinBlockCsum(bm, kBitmapCsumXor) ||
        DecodeLE64(bm.data() + 8) != e.blocknr) {
      return bad("bitmap block " + std::to_string(e.blocknr) + " fails its checksum");
    }
    for (uint32_t i = 0; i < kSmEntriesPerBitmap; i++) {
      const uint64_t blk = b * kSmEntriesPerBitmap + i;
      if (blk >= n) break;
      used[blk] = SmBitmapEntry(bm, i) != 0;
    }
  }
  return used;
}

}  // namespace volstack::lvm
