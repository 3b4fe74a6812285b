// libFuzzer target for every pool decoder of untrusted bytes (labels, uberblocks, block
// pointers, the MOS, space-map blocks). Not part of the normal build; build with e.g.
//   clang++ -std=c++20 -fsanitize=fuzzer,address -Isrc src/pool/format_fuzz.cc
//     src/pool/{blkptr,label,mos}_format.cc src/pool/checksum.cc src/util/status.cc
//     -lxxhash -lcrypto
// The first byte picks the decoder; the rest is its input. Decoders must return a Status,
// never crash, read out of bounds or abort.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/label_format.h"
#include "pool/mos_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace volstack::pool;
  if (size < 1) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 5) {
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
    default:
      (void)DecodeSpaceMapBlock(in).ok();
      break;
  }
  return 0;
}
