// The fuzz entry for every pool decoder of untrusted bytes (labels, uberblocks, block
// pointers, the MOS, space-map blocks, compressed data blocks, intent-log blocks). A header so that
// the libFuzzer target (format_fuzz.cc, built with -DVOLSTACK_FUZZ=ON) and the CI smoke test
// (fuzz_smoke_test.cc) run the same code while volstack_pool carries none of it. The first byte
// picks the decoder; the rest is its input. Decoders must return a Status, never crash, read out of
// bounds or abort.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/compress.h"
#include "pool/label_format.h"
#include "pool/mos_format.h"
#include "pool/zil_format.h"
#include "util/coding.h"

namespace volstack::pool {

inline int FuzzPoolFormat(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 8) {
    case 0:
      (void)DecodeBlockPtr(in).ok();
      break;
    case 1: {
      std::vector<uint8_t> slot(kUberSlotSize, 0);
      std::copy(in.begin(), in.begin() + std::min(in.size(), slot.size()), slot.begin());
      (void)DecodeUberblock(slot, 0).ok();
      break;
    }
    case 2: {
      std::vector<uint8_t> region(kLabelConfigSize, 0);
      std::copy(in.begin(), in.begin() + std::min(in.size(), region.size()), region.begin());
      (void)DecodeLabelConfig(region, 0).ok();
      break;
    }
    case 3:
      (void)DecodeMos(in).ok();
      break;
    case 4:
      (void)DecodeSpaceMapBlock(in).ok();
      break;
    case 7: {
      // An intent-log block: LE64 chain guid, LE64 seq, then the block in both formats.
      if (in.size() < 16) break;
      const uint64_t guid = DecodeLE64(in.data()), seq = DecodeLE64(in.data() + 8);
      const auto block = in.subspan(16);
      (void)DecodeZilBlock(block, guid, seq, kZilFormatPlain).ok();
      (void)DecodeZilBlock(block, guid, seq, kZilFormatStamped).ok();
      std::vector<bool> unreadable(block.size() / 512);
      for (size_t i = 0; i < unreadable.size(); i++) unreadable[i] = (block[i * 512] & 3) == 0;
      (void)ClassifyZilBlock(block, guid, seq, kZilFormatStamped, nullptr);
      (void)ClassifyZilBlock(block, guid, seq, kZilFormatStamped, &unreadable);
      break;
    }
    default: {
      // A compressed block (5 lz4, 6 zstd): two bytes of lsize in 512-byte units
      // (1..256: up to 128 KiB), then the stream.
      if (in.size() < 2) break;
      const size_t lsize = 512 * (1 + (in[0] | (in[1] << 8)) % 256);
      std::vector<uint8_t> out(lsize);
      (void)DecompressBlock(data[0] % 8 == 5 ? Compression::kLz4 : Compression::kZstd,
                            in.subspan(2), out)
          .ok();
      break;
    }
  }
  return 0;
}

}  // namespace volstack::pool
