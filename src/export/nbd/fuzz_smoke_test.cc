// The NBD fuzz entry (nbd_request_fuzz.h) in CI: a few thousand deterministic inputs, random
// bytes for every parser and mutations of valid messages, so a parser that crashes, reads
// out of bounds (under the ASan preset) or accepts lengths that do not add up fails here
// and not only under libFuzzer.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "export/nbd/nbd_request_fuzz.h"
#include "util/coding.h"

namespace volstack::exportfs::nbd {
namespace {

void PutBE32(std::vector<uint8_t>& v, uint32_t x) {
  v.resize(v.size() + 4);
  EncodeBE32(&v[v.size() - 4], x);
}
void PutString(std::vector<uint8_t>& v, const std::string& s) {
  PutBE32(v, static_cast<uint32_t>(s.size()));
  v.insert(v.end(), s.begin(), s.end());
}

TEST(NbdFuzzSmokeTest, RandomAndMutatedInputs) {
  std::vector<uint8_t> req = {0};
  req.resize(1 + kRequestSize);
  Request r;
  r.type = kCmdWrite;
  r.flags = kCmdFlagFua;
  r.cookie = 77;
  r.offset = 4096;
  r.length = 512;
  EncodeRequest(std::span<uint8_t, kRequestSize>(&req[1], kRequestSize), r);
  std::vector<uint8_t> info = {1};
  PutString(info, "trunk/funk");
  info.insert(info.end(), {0, 2, 0, kInfoName, 0, kInfoBlockSize});
  std::vector<uint8_t> meta = {2};
  PutString(meta, "trunk/funk");
  PutBE32(meta, 2);
  PutString(meta, "base:allocation");
  PutString(meta, "qemu:dirty-bitmap:x");
  // The seeds decode, so their mutations start deep inside each parser.
  ASSERT_TRUE(DecodeRequest(std::span<const uint8_t, kRequestSize>(&req[1], kRequestSize)).ok());
  ASSERT_TRUE(DecodeInfoRequest(std::span(info).subspan(1)).ok());
  ASSERT_TRUE(DecodeMetaContextRequest(std::span(meta).subspan(1)).ok());

  std::mt19937_64 rng(20261130);
  int runs = 0;
  for (int i = 0; i < 1500; i++) {
    std::vector<uint8_t> in(1 + rng() % 200);
    for (auto& b : in) b = static_cast<uint8_t>(rng() % 4 ? rng() % 8 : rng());  // small lengths
    in[0] = static_cast<uint8_t>(i % 3);
    FuzzNbdRequest(in.data(), in.size());
    runs++;
  }
  for (const auto& seed : {req, info, meta}) {
    for (int i = 0; i < 500; i++) {
      std::vector<uint8_t> in = seed;
      const size_t p = 1 + rng() % (in.size() - 1);
      switch (rng() % 3) {
        case 0:
          in[p] ^= static_cast<uint8_t>(1 + rng());
          break;
        case 1:
          in.resize(p);
          break;
        default:  // insert a byte at p
          in.resize(in.size() + 1);
          std::copy_backward(in.begin() + static_cast<long>(p), in.end() - 1, in.end());
          in[p] = static_cast<uint8_t>(rng());
      }
      FuzzNbdRequest(in.data(), in.size());
      runs++;
    }
  }
  EXPECT_EQ(runs, 1500 + 3 * 500);
}

}  // namespace
}  // namespace volstack::exportfs::nbd
