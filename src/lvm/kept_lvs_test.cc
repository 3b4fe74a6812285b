// Segment types volstack keeps but does not serve: lvm2's own on-disk text holding one LV of
// every type (tests/data/lvm/lvm2_every_segtype.txt, written by lvm2 2.03.16's vgcfgrestore)
// imports, and exports byte for byte as lvm2 wrote it; the unserved LVs and their sub-LVs are
// found; a VG in which one of them changed is refused; lvm2's report roles.
#include "lvm/kept_lvs.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "lvm/metadata.h"

namespace volstack::lvm {
namespace {

std::string EveryTypeText() {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + "lvm2_every_segtype.txt", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string VgPart(const std::string& s) { return s.substr(0, s.find("# Generated")); }

TEST(KeptLvsTest, EveryTypeRoundTripsByteForByte) {
  const std::string text = EveryTypeText();
  ASSERT_FALSE(text.empty());
  auto vg = ImportVg(text);
  ASSERT_TRUE(vg.ok()) << vg.status().ToString();
  std::set<std::string> kept;
  for (const auto& lv : vg->lvs) {
    for (const auto& s : lv.segments) {
      if (s.kept) kept.insert(s.type);
    }
  }
  const std::set<std::string> want = {
      "raid1",     "raid5_ls", "mirror", "snapshot",   "thin-pool",
      "thin",      "cache",    "vdo",    "vdo-pool",   "writecache",
      "integrity", "error",    "zero",   "frobnicate", "cache-pool+METADATA_FORMAT"};
  EXPECT_EQ(kept, want);
  ExportInfo info;
  info.description = "x";
  const std::string out = ExportVg(*vg, info);
  EXPECT_EQ(VgPart(out), VgPart(text));
  // Each kept LV's section alone, as a check that names the type when it fails.
  for (const auto& lv : vg->lvs) {
    const std::string head = "\n" + lv.name + " {\n";
    const size_t a = text.find(head), b = out.find(head);
    ASSERT_NE(a, std::string::npos);
    ASSERT_NE(b, std::string::npos);
    const size_t a_end = text.find("\n}\n}\n", a), b_end = out.find("\n}\n}\n", b);
    EXPECT_EQ(out.substr(b, b_end - b), text.substr(a, a_end - a)) << lv.name;
  }
  // The backup form (tabs) reads back to the same VG.
  info.backup_form = true;
  auto from_backup = ImportVg(ExportVg(*vg, info));
  ASSERT_TRUE(from_backup.ok()) << from_backup.status().ToString();
  info.backup_form = false;
  EXPECT_EQ(ExportVg(*from_backup, info), out);
}

TEST(KeptLvsTest, LvFieldsLvm2WritesRoundTrip) {
  // lvm2 2.03.16 wrote lin this way from a restore giving it a fixed minor, a policy and
  // read-ahead.
  std::string t = EveryTypeText();
  const std::string from = "status = [\"READ\", \"WRITE\", \"VISIBLE\"]\nflags = []\n";
  const size_t lin = t.find("\nlin {\n");
  ASSERT_NE(lin, std::string::npos);
  t.replace(t.find(from, lin), from.size(),
            "status = [\"READ\", \"WRITE\", \"FIXED_MINOR\", \"VISIBLE\"]\nflags = []\n");
  const std::string host = "creation_host = \"vm\"\n";
  t.insert(t.find(host, lin) + host.size(),
           "allocation_policy = \"contiguous\"\nread_ahead = 256\nmajor = 253\nminor = 9\n");
  auto vg = ImportVg(t);
  ASSERT_TRUE(vg.ok()) << vg.status().ToString();
  EXPECT_EQ(vg->FindLv("lin")->minor, 9);
  EXPECT_EQ(VgPart(ExportVg(*vg, {})), VgPart(t));
}

TEST(KeptLvsTest, UnservedLvsAndTheirSubLvs) {
  auto vg = *ImportVg(EveryTypeText());
  const auto u = FindUnservedLvs(vg);
  EXPECT_EQ(u.count("lin"), 0u);
  EXPECT_EQ(u.at("r1").type, "raid1");
  EXPECT_EQ(u.at("r1_rimage_1").owner, "r1");
  EXPECT_EQ(u.at("r1_rmeta_0").owner, "r1");
  EXPECT_EQ(u.at("pool_tdata").type, "thin-pool");
  EXPECT_EQ(u.at("thin1").type, "thin");
  EXPECT_EQ(u.at("origin").type, "snapshot");  // writing it would break the snapshot
  EXPECT_EQ(u.at("snap").owner, "snapshot0");
  EXPECT_EQ(u.at("cpool_cmeta").owner, "cpool");
  EXPECT_EQ(u.at("cached_corig").owner, "cached");
  EXPECT_EQ(u.at("vpool_vdata").owner, "vpool");
  EXPECT_EQ(u.at("m_mlog").owner, "m");
  EXPECT_EQ(u.at("unk").type, "frobnicate");
  EXPECT_TRUE(CheckServed(vg, "lin", "activated").ok());
  const Status s = CheckServed(vg, "r1_rimage_0", "activated");
  EXPECT_EQ(s.code(), EOPNOTSUPP);
  EXPECT_NE(s.message().find("vgx/r1_rimage_0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("raid1"), std::string::npos) << s.message();
}

TEST(KeptLvsTest, ChangesToUnservedLvsAreRefused) {
  const auto vg = *ImportVg(EveryTypeText());
  EXPECT_TRUE(CheckKeptUnchanged(vg, vg).ok());
  {
    auto v = vg;  // another LV changes: fine
    v.FindLv("lin")->tags.push_back("t");
    EXPECT_TRUE(CheckKeptUnchanged(vg, v).ok());
  }
  {
    auto v = vg;  // a raid image moved
    v.FindLv("r1_rimage_0")->segments[0].areas[0].start = 50;
    EXPECT_FALSE(CheckKeptUnchanged(vg, v).ok());
  }
  {
    auto v = vg;  // a kept item edited
    v.FindLv("pool")->segments[0].kept_items.back().values[0].integer = 0;
    EXPECT_FALSE(CheckKeptUnchanged(vg, v).ok());
  }
  {
    auto v = vg;  // removed
    std::erase_if(v.lvs, [](const LogicalVolume& lv) { return lv.name == "thin1"; });
    const Status s = CheckKeptUnchanged(vg, v);
    EXPECT_EQ(s.code(), EOPNOTSUPP);
    EXPECT_NE(s.message().find("vgx/thin1"), std::string::npos) << s.message();
  }
  {
    auto v = vg;  // extended
    LogicalVolume* lv = v.FindLv("cached_corig");
    Segment s = lv->segments[0];
    s.start_extent = lv->le_count();
    s.areas[0].start = 60;
    lv->segments.push_back(s);
    EXPECT_FALSE(CheckKeptUnchanged(vg, v).ok());
  }
}

TEST(KeptLvsTest, ReportRolesAsLvm2) {
  const auto vg = *ImportVg(EveryTypeText());
  const auto r = LvReportRoles(vg);
  // lv_attr[0] and [6] as lvm2 2.03.16's `lvs -a` printed them for this text.
  const std::map<std::string, std::string> want = {{"cached", "CC"},      {"cached_corig", "oC"},
                                                   {"cpool", "CC"},       {"cpool_cdata", "C-"},
                                                   {"cpool_cmeta", "e-"}, {"err", "vv"},
                                                   {"fast_cvol", "--"},   {"ilv", "g-"},
                                                   {"lin", "--"},         {"lvol0_pmspare", "e-"},
                                                   {"m", "mm"},           {"m_mimage_0", "Im"},
                                                   {"m_mlog", "lm"},      {"origin", "os"},
                                                   {"pool", "tt"},        {"pool_tdata", "T-"},
                                                   {"pool_tmeta", "e-"},  {"r1", "rr"},
                                                   {"r1_rimage_0", "Ir"}, {"r1_rmeta_1", "er"},
                                                   {"snap", "ss"},        {"thin1", "Vt"},
                                                   {"unk", "vu"},         {"vlv", "vv"},
                                                   {"vpool", "d-"},       {"vpool_vdata", "D-"},
                                                   {"wc", "CC"},          {"wc_wcorig", "oC"},
                                                   {"zer", "vv"}};
  for (const auto& [name, attr] : want) {
    const LvReportRole& role = r.at(name);
    EXPECT_EQ(std::string() + role.volume_type + role.target_type, attr) << name;
  }
  EXPECT_EQ(r.at("pool").zero, 'z');
  EXPECT_EQ(r.at("thin1").zero, 'z');
  EXPECT_FALSE(r.at("snapshot0").listed);
  EXPECT_TRUE(r.at("snap").visible);  // a COW is as visible as its origin
  EXPECT_EQ(r.at("thin1").pool, "pool");
  EXPECT_EQ(r.at("cached").origin, "cached_corig");
  EXPECT_EQ(r.at("snap").origin, "origin");
  EXPECT_EQ(r.at("m").log, "m_mlog");
  EXPECT_EQ(ReportedSegType("cache-pool+METADATA_FORMAT"), "cache-pool");
}

TEST(KeptLvsTest, KeptSegmentNamingAPvIsRefused) {
  std::string t = EveryTypeText();
  const std::string from = "origin = \"origin\"";
  t.replace(t.find(from), from.size(), "origin = \"pv0\"");
  EXPECT_EQ(ImportVg(t).status().code(), EOPNOTSUPP);
}

TEST(ConfigTextTest, LayoutIsKept) {
  const std::string text =
      "a = 1\n\nb = [\n\"x\", 1,\n\"y\", 2\n]\nc = [\"p\", \"q\"]\ns {\n\nt = "
      "1.5\n}\nk=[1,\"z\"]\n";
  auto root = ParseConfig(text);
  ASSERT_TRUE(root.ok());
  std::string out;
  for (const auto& c : root->children) WriteConfigItem(c, 0, false, &out);
  EXPECT_EQ(out, text);
  EXPECT_EQ(root->Find("b")->rows, (std::vector<uint32_t>{2, 2}));
  EXPECT_TRUE(root->Find("c")->rows.empty());
  std::string tabs;
  WriteConfigItem(*root->Find("b"), 1, true, &tabs);
  EXPECT_EQ(tabs, "\n\tb = [\n\t\t\"x\", 1,\n\t\t\"y\", 2\n\t]\n");
}

}  // namespace
}  // namespace volstack::lvm

namespace volstack::lvm {
namespace {

std::string HistoricalText() {
  std::string dir = __FILE__;
  dir = dir.substr(0, dir.rfind("/src/lvm/")) + "/tests/data/lvm/";
  std::ifstream in(dir + "lvm2_historical_lvs.txt", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// lvm2 2.03.16 wrote this VG (two historical LVs, one the origin of the other, the newer with
// thin1 as its descendant) after an lvcreate: volstack writes the VG section back as is.
TEST(KeptLvsTest, HistoricalLvsRoundTripByteForByte) {
  const std::string text = HistoricalText();
  ASSERT_NE(text.find("historical_logical_volumes {"), std::string::npos);
  auto vg = ImportVg(text);
  ASSERT_TRUE(vg.ok()) << vg.status().ToString();
  ASSERT_TRUE(vg->historical_lvs.has_value());
  ExportInfo info;
  info.description = "x";
  const std::string out = ExportVg(*vg, info);
  EXPECT_EQ(out.substr(0, out.find("# Generated")), text.substr(0, text.find("# Generated")));
  // After another LV goes, still there; the backup form reads back the same.
  vg->lvs.erase(vg->lvs.begin());
  const std::string smaller = ExportVg(*vg, info);
  EXPECT_NE(smaller.find("\n}\n\nhistorical_logical_volumes {\n\nold1 {\n"), std::string::npos);
  info.backup_form = true;
  auto back = ImportVg(ExportVg(*vg, info));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  info.backup_form = false;
  EXPECT_EQ(ExportVg(*back, info), smaller);
  // Removing thin1, which old1 names as its descendant, is refused.
  auto thin = std::find_if(vg->lvs.begin(), vg->lvs.end(),
                           [](const LogicalVolume& l) { return l.name == "thin1"; });
  ASSERT_NE(thin, vg->lvs.end());
  vg->lvs.erase(thin);
  Status s = ValidateVg(*vg);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("historical LV old1 names LV thin1"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace volstack::lvm
