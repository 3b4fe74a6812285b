// Tests of the LVM2 binary structures and the checksum, on real lvm2 bytes where possible.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "lvm/crc.h"
#include "lvm/label_format.h"
#include "lvm/uuid.h"

namespace volstack::lvm {
namespace {

std::vector<uint8_t> TestData(const std::string& name) {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + name, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(LvmCrcTest, Vectors) {
  EXPECT_EQ(LvmCrc(std::string_view("")), 0xf597a6cfu);
  EXPECT_EQ(LvmCrc(std::string_view("123456789")), 0x4991cf02u);
  // Chaining over two parts equals one pass.
  EXPECT_EQ(LvmCrc(std::string_view("6789"), LvmCrc(std::string_view("12345"))), 0x4991cf02u);
}

TEST(UuidTest, FormatParse) {
  std::string id = GenerateId();
  ASSERT_TRUE(IsValidRawId(id));
  std::string text = FormatId(id);
  EXPECT_EQ(text.size(), 38u);
  EXPECT_EQ(text[6], '-');
  EXPECT_EQ(*ParseId(text), id);
  EXPECT_FALSE(ParseId("short").ok());
  EXPECT_FALSE(ParseId("tGAfhW-7q0e-3jta-JFxu-RZq8-hrCl-tVSNb$").ok());
}

TEST(LabelTest, DecodesRealLvm2Label) {
  auto head = TestData("lvm2_testvg_pv0_head.bin");
  ASSERT_EQ(head.size(), 16384u);
  auto label = FindLabel(std::span<const uint8_t>(head).subspan(0, 2048));
  ASSERT_TRUE(label.ok()) << label.status().ToString();
  EXPECT_EQ(label->sector, 1u);
  EXPECT_EQ(FormatId(label->pv_uuid), "2APWSX-ofcG-DUjX-liHK-mU9F-j8Lv-Zf8zQw");
  EXPECT_EQ(label->device_size, 64u << 20);
  ASSERT_EQ(label->data_areas.size(), 1u);
  EXPECT_EQ(label->data_areas[0], (DiskLocn{1048576, 0}));
  ASSERT_EQ(label->metadata_areas.size(), 1u);
  EXPECT_EQ(label->metadata_areas[0], (DiskLocn{4096, 1044480}));
  EXPECT_TRUE(label->in_use());
  // Re-encoding gives lvm2's exact bytes.
  std::vector<uint8_t> sector(512);
  ASSERT_TRUE(EncodeLabelSector(*label, sector).ok());
  EXPECT_TRUE(std::equal(sector.begin(), sector.end(), head.begin() + 512));

  auto mda = DecodeMdaHeader(std::span<const uint8_t>(head).subspan(4096, 512), 4096);
  ASSERT_TRUE(mda.ok()) << mda.status().ToString();
  EXPECT_EQ(mda->size, 1044480u);
  EXPECT_EQ(mda->committed.offset, 4608u);
  EXPECT_EQ(mda->committed.size, 1574u);
  std::vector<uint8_t> hs(512);
  EncodeMdaHeader(*mda, hs);
  EXPECT_TRUE(std::equal(hs.begin(), hs.end(), head.begin() + 4096));
}

TEST(LabelTest, BadChecksumAndOtherSectors) {
  auto head = TestData("lvm2_testvg_pv0_head.bin");
  head.resize(2048);
  auto bad = head;
  bad[512 + 100] ^= 1;
  auto r = FindLabel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
  EXPECT_NE(r.status().message().find("checksum"), std::string::npos);
  // Moved to sector 3 with a matching sector number: found there.
  PvLabel l = *FindLabel(head);
  l.sector = 3;
  std::vector<uint8_t> moved(2048, 0);
  ASSERT_TRUE(EncodeLabelSector(l, std::span<uint8_t>(moved).subspan(3 * 512, 512)).ok());
  auto found = FindLabel(moved);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->sector, 3u);
  // A label whose sector_xl does not match where it sits is ignored.
  std::vector<uint8_t> wrong(2048, 0);
  std::copy(moved.begin() + 3 * 512, moved.begin() + 4 * 512, wrong.begin() + 512);
  EXPECT_TRUE(FindLabel(wrong).status().IsNotFound());
  // Zeroes: no label.
  EXPECT_TRUE(FindLabel(std::vector<uint8_t>(2048, 0)).status().IsNotFound());
}

TEST(LabelTest, HostileAreaListsDoNotOverrun) {
  PvLabel l;
  l.pv_uuid = GenerateId();
  l.data_areas = {{1 << 20, 0}};
  std::vector<uint8_t> sector(512);
  ASSERT_TRUE(EncodeLabelSector(l, sector).ok());
  // Fill the rest of the sector with non-zero locns, fix the CRC: the decoder must stop at
  // the end of the sector with an error, not read beyond.
  for (size_t i = 32 + 40; i < 512; i++) sector[i] = 0x11;
  uint32_t crc = LvmCrc(std::span<const uint8_t>(sector).subspan(20));
  for (int i = 0; i < 4; i++) sector[16 + i] = static_cast<uint8_t>(crc >> (8 * i));
  auto r = DecodeLabelSector(sector, 1);
  EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
}

TEST(MdaHeaderTest, RoundTripAndChecks) {
  MdaHeader h;
  h.start = 4096;
  h.size = 1044480;
  h.committed = {512, 1000, 0x1234, 0};
  h.precommitted = {1536, 900, 0x5678, 0};
  std::vector<uint8_t> s(512);
  EncodeMdaHeader(h, s);
  auto d = DecodeMdaHeader(s, 4096);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->committed, h.committed);
  EXPECT_EQ(d->precommitted, h.precommitted);
  EXPECT_TRUE(DecodeMdaHeader(s, 8192).status().IsCorruption());  // start mismatch
  s[10] ^= 0xff;
  EXPECT_TRUE(DecodeMdaHeader(s, 4096).status().IsCorruption());
  // A slot pointing outside the area.
  h.committed = {2000000, 10, 0, 0};
  EncodeMdaHeader(h, s);
  EXPECT_TRUE(DecodeMdaHeader(s, 4096).status().IsCorruption());
}

}  // namespace
}  // namespace volstack::lvm
