// The LVM fuzz entry (metadata_fuzz.h) in CI: a few thousand deterministic inputs per run,
// random bytes for every decoder and mutations of real lvm2 bytes (tests/data/lvm), so a
// decoder that crashes, reads out of bounds (under the ASan preset) or breaks a round trip
// fails here and not only under libFuzzer. The seeds are checked to decode first, so the
// mutations start deep inside each decoder.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <random>

#include "lvm/metadata_fuzz.h"

namespace volstack::lvm {
namespace {

std::vector<uint8_t> RealHead() {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + "lvm2_testvg_pv0_head.bin", std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// lvm2's text for a VG holding an LV of every segment type it writes (kept_lvs_test.cc).
std::vector<uint8_t> EveryTypeText() {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + "lvm2_every_segtype.txt", std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> Seed(uint8_t selector, std::span<const uint8_t> body,
                          std::vector<uint8_t> prefix = {}) {
  std::vector<uint8_t> s(1 + prefix.size() + body.size());
  s[0] = selector;
  std::copy(prefix.begin(), prefix.end(), s.begin() + 1);
  std::copy(body.begin(), body.end(), s.begin() + 1 + static_cast<long>(prefix.size()));
  return s;
}

// One mutation of `in` (never of the selector byte): byte flips, an interesting 8-byte value
// at an aligned offset, a truncation, or an inserted run.
void Mutate(std::vector<uint8_t>& in, std::mt19937_64& rng) {
  static const uint64_t kValues[] = {
      0, 1, 511, 512, 4096, 0x7fffffff, 0xffffffff, uint64_t{1} << 63, ~uint64_t{0}};
  if (in.size() < 2) return;
  auto pos = [&] { return 1 + rng() % (in.size() - 1); };
  switch (rng() % 4) {
    case 0:
      for (int i = 0, n = 1 + rng() % 8; i < n; i++) in[pos()] ^= static_cast<uint8_t>(1 + rng());
      break;
    case 1: {
      size_t p = pos() & ~size_t{7};
      if (p == 0) p = 8;
      if (p + 8 <= in.size()) EncodeLE64(&in[p], kValues[rng() % std::size(kValues)]);
      break;
    }
    case 2:
      in.resize(pos());
      break;
    default: {
      const char* kBits[] = {"{", "}", "[", "]", "\"", "=", "#", ",", "-9999999999999999999"};
      std::string_view b = kBits[rng() % std::size(kBits)];
      in.insert(in.begin() + static_cast<long>(pos()), b.begin(), b.end());
    }
  }
}

TEST(LvmFuzzSmokeTest, SeedsDecode) {
  const auto head = RealHead();
  ASSERT_EQ(head.size(), 16384u);
  const std::span<const uint8_t> h(head);
  ASSERT_TRUE(DecodeLabelSector(h.subspan(512, 512), 1).ok());
  auto mda = DecodeMdaHeader(h.subspan(4096, 512), 4096);
  ASSERT_TRUE(mda.ok());
  const std::string_view text(reinterpret_cast<const char*>(&head[4096 + mda->committed.offset]),
                              mda->committed.size);
  ASSERT_TRUE(ImportVg(text).ok());
  const auto every = EveryTypeText();
  ASSERT_TRUE(
      ImportVg(std::string_view(reinterpret_cast<const char*>(every.data()), every.size())).ok());
  // The whole-PV mode finds the VG in the seed.
  auto dev = fuzz_detail::DeviceWith(h, 0, 6 << 20);
  Lvm lvm([&](const std::string&,
              bool) -> Result<bdev::BlockDevicePtr> { return bdev::BlockDevicePtr(dev); },
          true);
  lvm.Scan({"seed"});
  ASSERT_EQ(lvm.vgs().size(), 1u);
}

TEST(LvmFuzzSmokeTest, RandomAndMutatedInputs) {
  const auto head = RealHead();
  ASSERT_EQ(head.size(), 16384u);
  const std::span<const uint8_t> h(head);
  const uint64_t text_off = 4096 + DecodeLE64(&head[4096 + 40]);
  const uint64_t text_len = DecodeLE64(&head[4096 + 48]);
  const auto text = h.subspan(text_off, text_len);
  const std::vector<std::vector<uint8_t>> seeds = {
      Seed(0, text),
      Seed(1, text),
      Seed(2 + 7 * 1, h.subspan(512, 512)),  // LBA 1
      Seed(3, h.subspan(512 + 32, 480)),
      Seed(4, h.subspan(4096, 512), {1}),
      Seed(5, h.subspan(4096), {250}),
      Seed(6, h),
      Seed(0, EveryTypeText()),
      Seed(1, EveryTypeText()),
  };
  std::mt19937_64 rng(20261130);
  int runs = 0;
  for (int i = 0; i < 1400; i++) {  // random bytes for every decoder
    std::vector<uint8_t> in(1 + rng() % 1200);
    for (auto& b : in) b = static_cast<uint8_t>(rng());
    in[0] = static_cast<uint8_t>(i % 7);
    FuzzLvmMetadata(in.data(), in.size());
    runs++;
  }
  for (const auto& seed : seeds) {  // mutations of real bytes
    for (int i = 0; i < 300; i++) {
      std::vector<uint8_t> in = seed;
      for (int m = 0, n = 1 + rng() % 3; m < n; m++) Mutate(in, rng);
      FuzzLvmMetadata(in.data(), in.size());
      runs++;
    }
  }
  EXPECT_EQ(runs, 1400 + 9 * 300);
}

}  // namespace
}  // namespace volstack::lvm
