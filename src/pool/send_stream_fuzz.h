// The fuzz entry for the send stream parser (send_stream.h): every record of the input is
// read and checked until the stream ends or is refused, and a compressed WRITE's payload
// decoded as the receiver decodes it. A header so that the libFuzzer
// target (send_stream_fuzz.cc, built with -DVOLSTACK_FUZZ=ON) and the CI smoke test
// (send_test.cc) run the same code. The parser must return a Status, never crash, read out
// of bounds or allocate what a damaged length asks for.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pool/compress.h"
#include "pool/send_stream.h"

namespace volstack::pool {

inline int FuzzSendStream(const uint8_t* data, size_t size) {
  size_t pos = 0;
  StreamReader reader([&](uint8_t* dst, size_t n) -> Result<size_t> {
    const size_t k = std::min(n, size - pos);
    if (k > 0) std::memcpy(dst, data + pos, k);
    pos += k;
    return k;
  });
  std::vector<uint8_t> block;
  for (int i = 0; i < 1 << 20; i++) {
    auto r = reader.Next();
    if (!r.ok()) break;
    if (r->type == RecordType::kWrite && r->comp != Compression::kNone) {
      block.resize(std::min<uint64_t>(r->length, kMaxWritePayload));
      DecompressBlock(r->comp, r->payload, block).IgnoreError();
    }
  }
  return 0;
}

}  // namespace volstack::pool
