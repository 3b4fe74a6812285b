// Lvm::ChangePvUuid (pvchange -u): the label and the VG metadata both take the new UUID, in
// one commit (seqno + 1 on every mda of every PV), the LVs still map onto the same extents,
// and every refusal or failed commit leaves the old UUID everywhere.
#include <gtest/gtest.h>

#include "bdev/memory_device.h"
#include "lvm/allocator.h"
#include "lvm/lvm.h"
#include "lvm/test_devices.h"
#include "lvm/uuid.h"
#include "lvm/vg_ops.h"

namespace volstack::lvm {
namespace {

using testing::Devices;

class PvUuidTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n : {"a", "b", "c"}) d_.map[n] = bdev::MemoryDevice::Create(64 << 20);
    Lvm lvm(d_.opener(), false);
    Pv* a = *lvm.CreatePv("a", {});
    PvCreateOptions two;
    two.metadata_copies = 2;  // b carries two mdas: both must take the new text
    Pv* b = *lvm.CreatePv("b", two);
    ASSERT_TRUE(lvm.CreatePv("c", {}).ok());
    auto vg = NewVg("vg", 8192, {a, b});
    ASSERT_TRUE(vg.ok());
    NewLvOptions lv;
    lv.name = "str";
    lv.alloc.extents = 4;
    lv.alloc.stripes = 2;
    lv.alloc.stripe_size = 128;
    ASSERT_TRUE(CreateLv(*vg, lv).ok());
    ASSERT_TRUE(lvm.Commit(*vg, "create").ok());
  }

  std::unique_ptr<Lvm> Session() {
    auto lvm = std::make_unique<Lvm>(d_.opener(), false);
    lvm->Scan(d_.names());
    return lvm;
  }

  // Writes a pattern through the LV, so a remap onto other extents would show.
  void WritePattern(Lvm& lvm) {
    auto lv = lvm.Activate(*lvm.FindVg("vg"), "str");
    ASSERT_TRUE(lv.ok()) << lv.status().ToString();
    std::vector<uint8_t> buf((*lv)->size());
    for (size_t i = 0; i < buf.size(); i++) buf[i] = static_cast<uint8_t>(i * 7 + i / 4096);
    ASSERT_TRUE((*lv)->Write(0, buf).ok());
    pattern_ = buf;
  }
  void CheckPattern(Lvm& lvm) {
    auto lv = lvm.Activate(*lvm.FindVg("vg"), "str");
    ASSERT_TRUE(lv.ok()) << lv.status().ToString();
    std::vector<uint8_t> got(pattern_.size());
    ASSERT_TRUE((*lv)->Read(0, got).ok());
    EXPECT_TRUE(got == pattern_);
  }

  Devices d_;
  std::vector<uint8_t> pattern_;
};

TEST_F(PvUuidTest, NewUuidInLabelAndInEveryMetadataCopy) {
  auto lvm = Session();
  WritePattern(*lvm);
  Pv* a = lvm->FindPv("a");
  VgHandle* h = lvm->FindVg("vg");
  const uint32_t seqno = h->vg.seqno;
  const std::string old = a->uuid();
  const std::string b_uuid = lvm->FindPv("b")->uuid();
  const std::string fresh = GenerateId();
  VolumeGroup vg = h->vg;
  vg.pvs[vg.FindPvById(old)].id = fresh;
  ASSERT_TRUE(lvm->ChangePvUuid(a, fresh, &vg, "pvchange -u a").ok());
  EXPECT_EQ(a->uuid(), fresh);
  EXPECT_EQ(lvm->VgOfPv(a), lvm->FindVg("vg"));

  // A new session sees the new UUID in the label and the metadata, one seqno later, the same
  // on all three mdas, and the VG whole and consistent.
  lvm = Session();
  EXPECT_TRUE(lvm->scan_errors().empty());
  h = lvm->FindVg("vg");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->vg.seqno, seqno + 1);
  EXPECT_FALSE(h->partial());
  EXPECT_FALSE(h->inconsistent);
  EXPECT_EQ(lvm->FindPv("a")->uuid(), fresh);
  EXPECT_EQ(h->vg.FindPvById(old), -1);
  EXPECT_EQ(h->vg.pvs[0].id, fresh);  // same slot (pv0): the LV areas still name it
  EXPECT_EQ(h->vg.pvs[1].id, b_uuid);
  int mdas = 0;
  for (const char* n : {"a", "b"}) {
    for (const auto& c : lvm->FindPv(n)->copies()) {
      ASSERT_TRUE(c.vg) << n;
      EXPECT_EQ(c.vg->seqno, seqno + 1) << n;
      EXPECT_EQ(c.vg->pvs[0].id, fresh) << n;
      mdas++;
    }
  }
  EXPECT_EQ(mdas, 3);
  CheckPattern(*lvm);
  EXPECT_EQ(lvm->FindPv(FormatId(fresh)), lvm->FindPv("a"));
}

TEST_F(PvUuidTest, OrphanGetsANewLabelOnly) {
  auto lvm = Session();
  Pv* c = lvm->FindPv("c");
  const std::string fresh = GenerateId();
  const uint32_t seqno = lvm->FindVg("vg")->vg.seqno;
  ASSERT_TRUE(lvm->ChangePvUuid(c, fresh, nullptr, "pvchange -u c").ok());
  lvm = Session();
  EXPECT_EQ(lvm->FindPv("c")->uuid(), fresh);
  EXPECT_EQ(lvm->VgOfPv(lvm->FindPv("c")), nullptr);
  EXPECT_FALSE(lvm->FindPv("c")->label().in_use());
  EXPECT_EQ(lvm->FindVg("vg")->vg.seqno, seqno);
}

TEST_F(PvUuidTest, RefusalsAndFailedCommitsKeepTheOldUuid) {
  auto lvm = Session();
  WritePattern(*lvm);
  Pv* a = lvm->FindPv("a");
  const std::string old = a->uuid();
  const uint32_t seqno = lvm->FindVg("vg")->vg.seqno;
  VolumeGroup base = lvm->FindVg("vg")->vg;
  auto with_id = [&](const std::string& id) {
    VolumeGroup vg = base;
    vg.pvs[vg.FindPvById(old)].id = id;
    return vg;
  };
  // Another PV's UUID, an invalid one, metadata that does not carry the new UUID, no
  // metadata for a PV of a VG.
  const std::string c_uuid = lvm->FindPv("c")->uuid();
  VolumeGroup dup = with_id(c_uuid);
  EXPECT_EQ(lvm->ChangePvUuid(a, c_uuid, &dup, "x").code(), EEXIST);
  VolumeGroup bad = with_id("short");
  EXPECT_EQ(lvm->ChangePvUuid(a, "short", &bad, "x").code(), EINVAL);
  const std::string fresh = GenerateId();
  EXPECT_EQ(lvm->ChangePvUuid(a, fresh, &base, "x").code(), EINVAL);
  EXPECT_EQ(lvm->ChangePvUuid(a, fresh, nullptr, "x").code(), EINVAL);
  // A commit that fails validation (two LVs on the same extents) after the label was
  // written: the old label comes back.
  VolumeGroup overlap = with_id(fresh);
  LogicalVolume twin = *overlap.FindLv("str");
  twin.name = "twin";
  twin.id = GenerateId();
  overlap.lvs.push_back(twin);
  EXPECT_FALSE(lvm->ChangePvUuid(a, fresh, &overlap, "x").ok());
  EXPECT_EQ(a->uuid(), old);

  lvm = Session();
  EXPECT_EQ(lvm->FindPv("a")->uuid(), old);
  VgHandle* h = lvm->FindVg("vg");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->vg.seqno, seqno);
  EXPECT_FALSE(h->partial());
  CheckPattern(*lvm);

  // A VG with a missing PV is never written.
  d_.map.erase("b");
  lvm = Session();
  h = lvm->FindVg("vg");
  ASSERT_TRUE(h && h->partial());
  VolumeGroup partial = h->vg;
  partial.pvs[partial.FindPvById(old)].id = fresh;
  EXPECT_EQ(lvm->ChangePvUuid(lvm->FindPv("a"), fresh, &partial, "x").code(), ENOENT);
  EXPECT_EQ(lvm->FindPv("a")->uuid(), old);
}

}  // namespace
}  // namespace volstack::lvm
