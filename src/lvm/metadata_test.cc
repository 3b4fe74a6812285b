// Tests of the metadata text: parser robustness, import of lvm2's text, export in lvm2's
// exact layout, validation.
#include "lvm/metadata.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "lvm/config_text.h"
#include "lvm/label_format.h"
#include "lvm/uuid.h"
#include "util/coding.h"

namespace volstack::lvm {
namespace {

// The committed text of the real lvm2 PV image (tests/data/lvm), NUL included.
std::string RealText() {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + "lvm2_testvg_pv0_head.bin", std::ios::binary);
  std::vector<uint8_t> head(std::istreambuf_iterator<char>(in), {});
  const uint8_t* slot = &head[4096 + 40];
  uint64_t off = DecodeLE64(slot), size = DecodeLE64(slot + 8);
  return std::string(reinterpret_cast<const char*>(&head[4096 + off]), size);
}

TEST(ConfigTextTest, Grammar) {
  auto r = ParseConfig(
      "a = 1\nb = \"x\\\"y\"  # comment\nc = [1, \"two\", 3,]\nd = []\ns {\n t = -5 u = 1.5 "
      "v = 'q' w = bare\n}\na = 2\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r->GetInt("a"), 2);  // later duplicate wins
  EXPECT_EQ(*r->GetString("b"), "x\"y");
  const ConfigNode* c = r->Find("c");
  ASSERT_TRUE(c && c->is_array);
  EXPECT_EQ(c->values.size(), 3u);
  EXPECT_TRUE(r->Find("d")->values.empty());
  const ConfigNode* s = r->FindSection("s");
  ASSERT_TRUE(s);
  EXPECT_EQ(*s->GetInt("t"), -5);
  EXPECT_EQ(s->Find("u")->values[0].type, ConfigValue::Type::kFloat);
  EXPECT_EQ(*s->GetString("v"), "q");
  EXPECT_EQ(*s->GetString("w"), "bare");
}

TEST(ConfigTextTest, HostileText) {
  std::string deep;
  for (int i = 0; i < 10000; i++) deep += "a {";
  EXPECT_TRUE(ParseConfig(deep).status().IsCorruption());
  EXPECT_TRUE(ParseConfig("x = 99999999999999999999999").status().IsCorruption());
  EXPECT_TRUE(ParseConfig("x = \"unterminated").status().IsCorruption());
  EXPECT_TRUE(ParseConfig("x = [1, 2").status().IsCorruption());
  EXPECT_TRUE(ParseConfig("x {").status().IsCorruption());
  EXPECT_TRUE(ParseConfig("}").status().IsCorruption());
  EXPECT_TRUE(ParseConfig("x").status().IsCorruption());
  EXPECT_TRUE(ParseConfig("x = ").status().IsCorruption());
  // Every prefix and a sprinkle of byte flips of real text: an error or a VG, never a crash.
  const std::string text = RealText();
  for (size_t n = 0; n < text.size(); n += 7) (void)ImportVg(text.substr(0, n)).ok();
  for (size_t i = 0; i < text.size(); i += 13) {
    std::string t = text;
    t[i] = static_cast<char>(t[i] ^ 0x5a);
    (void)ImportVg(t).ok();
  }
}

TEST(MetadataTest, ImportsRealLvm2Text) {
  auto vg = ImportVg(RealText());
  ASSERT_TRUE(vg.ok()) << vg.status().ToString();
  EXPECT_EQ(vg->name, "testvg");
  EXPECT_EQ(FormatId(vg->id), "Y0flvd-vlsb-kfc6-hqXW-6eRf-QPIF-wJH3ue");
  EXPECT_EQ(vg->seqno, 4u);
  EXPECT_EQ(vg->extent_size, 8192u);
  ASSERT_EQ(vg->pvs.size(), 2u);
  EXPECT_EQ(vg->pvs[1].device, "/dev/loop1");
  EXPECT_EQ(vg->pvs[0].pe_count, 15u);
  ASSERT_EQ(vg->lvs.size(), 2u);
  const LogicalVolume& lv1 = vg->lvs[0];
  EXPECT_EQ(lv1.name, "lv1");
  ASSERT_EQ(lv1.segments.size(), 2u);
  EXPECT_EQ(lv1.segments[1].start_extent, 2u);
  EXPECT_EQ(lv1.segments[1].areas[0], (SegmentArea{0, "", 4}));
  const LogicalVolume& lvs = vg->lvs[1];
  EXPECT_EQ(lvs.segments[0].stripe_count(), 2u);
  EXPECT_EQ(lvs.segments[0].stripe_size, 128u);
  EXPECT_EQ(lvs.segments[0].areas[1], (SegmentArea{1, "", 0}));
  EXPECT_EQ(vg->allocated_extents(), 9u);
}

TEST(MetadataTest, ExportMatchesLvm2Layout) {
  const std::string text = RealText();
  auto vg = ImportVg(text);
  ASSERT_TRUE(vg.ok());
  ExportInfo info;
  info.description = "x";
  info.creation_host = "vm";
  std::string out = ExportVg(*vg, info);
  // The VG section is byte-identical to lvm2's; only the comment header differs.
  auto vg_part = [](const std::string& s) { return s.substr(0, s.find("# Generated")); };
  EXPECT_EQ(vg_part(out), vg_part(text));
  EXPECT_EQ(out.back(), '\0');
  EXPECT_EQ(out[out.size() - 2], '\n');
  auto again = ImportVg(out);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ExportVg(*again, info), out);
  // The backup form parses to the same VG.
  info.backup_form = true;
  std::string backup = ExportVg(*vg, info);
  EXPECT_EQ(backup.find("contents"), backup.find("\ncontents") + 1);
  EXPECT_LT(backup.find("contents"), backup.find("testvg {"));
  auto from_backup = ImportVg(backup);
  ASSERT_TRUE(from_backup.ok()) << from_backup.status().ToString();
  info.backup_form = false;
  EXPECT_EQ(ExportVg(*from_backup, info), out);
}

TEST(MetadataTest, PvmoveMetadataRoundTrips) {
  std::string text = RealText();
  // Rewrite lv1's first segment to map through a pvmove0 mirror, as lvm2's pvmove does.
  auto vg = ImportVg(text);
  ASSERT_TRUE(vg.ok());
  LogicalVolume mv;
  mv.name = "pvmove0";
  mv.id = GenerateId();
  mv.status = {"READ", "WRITE", "PVMOVE", "LOCKED"};
  mv.allocation_policy = "contiguous";
  Segment m;
  m.type = "mirror";
  m.extent_count = 2;
  m.region_size = 4096;
  m.areas = {{0, "", 0}, {1, "", 2}};
  mv.segments.push_back(m);
  vg->lvs[0].segments[0].areas[0] = {-1, "pvmove0", 0};
  vg->lvs[0].status.push_back("LOCKED");
  vg->lvs.push_back(mv);
  ASSERT_TRUE(ValidateVg(*vg).ok()) << ValidateVg(*vg).ToString();
  std::string out = ExportVg(*vg, {});
  EXPECT_NE(out.find("type = \"mirror\"\nmirror_count = 2\nextents_moved = 0\nregion_size = "
                     "4096\n\nmirrors = [\n\"pv0\", 0,\n\"pv1\", 2\n]"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("\"pvmove0\", 0\n"), std::string::npos);
  auto back = ImportVg(out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->lvs[0].segments[0].areas[0].lv, "pvmove0");
}

TEST(MetadataTest, ValidationCatchesBadLayouts) {
  auto vg = *ImportVg(RealText());
  {
    auto v = vg;  // overlap with lv1's PEs 0-1
    v.lvs[1].segments[0].areas[0].start = 1;
    EXPECT_FALSE(ValidateVg(v).ok());
  }
  {
    auto v = vg;  // beyond the PV
    v.lvs[0].segments[1].areas[0].start = 14;
    EXPECT_FALSE(ValidateVg(v).ok());
  }
  {
    auto v = vg;  // gap in LEs
    v.lvs[0].segments[1].start_extent = 3;
    EXPECT_FALSE(ValidateVg(v).ok());
  }
  {
    auto v = vg;  // unknown LV area
    v.lvs[0].segments[1].areas[0] = {-1, "nosuch", 0};
    EXPECT_FALSE(ValidateVg(v).ok());
  }
  {
    auto v = vg;  // duplicate names
    v.lvs[1].name = "lv1";
    EXPECT_FALSE(ValidateVg(v).ok());
  }
  // Missing required fields in text.
  std::string t = RealText();
  for (const char* key : {"extent_size = 8192\n", "pe_count = 15\n", "seqno = 4\n",
                          "segment_count = 2\n", "stripe_count = 1\n"}) {
    std::string m = t;
    m.erase(m.find(key), std::string(key).size());
    auto r = ImportVg(m);
    EXPECT_FALSE(r.ok()) << key;
  }
  std::string huge = t;
  huge.replace(huge.find("pe_count = 15"), 13, "pe_count = 99999999999999");
  EXPECT_FALSE(ImportVg(huge).ok());
}

}  // namespace
}  // namespace volstack::lvm
