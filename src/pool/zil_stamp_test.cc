// Stamped log blocks (zil_format.h, block format 2): a log write torn by a crash at any
// sector boundary (the rest of the block holding what was there before, or the cut sector
// reading back as an I/O error) replays to the last acknowledged commit and imports without
// a word; a block written whole and damaged since (any byte of any sector) is refused at
// import, writing nothing, and `rewind` (zpool import -F) imports without the lost records
// and lists them. How: one pool, three acknowledged commits; the image before and after the
// last commit's log write gives that write's extent; each case forks the image and edits it.
#include <gtest/gtest.h>

#include <algorithm>

#include "bdev/fault_device.h"
#include "pool/mos_format.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"
#include "pool/zil_format.h"
#include "util/coding.h"

namespace volstack::pool {
namespace {

using testing::kMiB;
using testing::Pattern;

constexpr uint64_t kDev = 64 * kMiB;

// --- the format alone ---

std::vector<uint8_t> OneBlock(uint32_t sectors, std::vector<uint8_t>* data) {
  *data = Pattern(3000, 4);
  ZilRecordRef rec{ZilRecordType::kWrite, 0, 7, 8192, data->size(), data->data()};
  ZilBlockInfo info{0xabcd, 9, 99, Dva{0, 256, 2 << 20}};
  std::vector<uint8_t> out(sectors * 512);
  EncodeZilBlock(info, {&rec, 1}, out);
  return out;
}

TEST(ZilStampTest, StampedBlockRoundTrips) {
  std::vector<uint8_t> data;
  auto b = OneBlock(8, &data);
  auto d = DecodeZilBlock(b, 0xabcd, 9);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->records.size(), 1u);
  EXPECT_EQ(d->records[0].data, data);
  EXPECT_EQ(ZilPhysSize(kZilFormatStamped, d->used), 7u * 512);
  EXPECT_TRUE(DecodeZilBlock(b, 0xabcd, 10).status().IsCorruption());
  EXPECT_TRUE(DecodeZilBlock(b, 0xabce, 9).status().IsCorruption());
  // The plain format's reader does not take a stamped block.
  EXPECT_FALSE(DecodeZilBlock(b, 0xabcd, 9, kZilFormatPlain).ok());
}

TEST(ZilStampTest, AnyDamagedByteOfAWholeWriteIsDamageNotATear) {
  std::vector<uint8_t> data;
  const auto b = OneBlock(8, &data);
  const uint64_t used = DecodeZilBlock(b, 0xabcd, 9)->used;
  for (size_t i = 0; i < b.size(); i++) {
    auto bad = b;
    bad[i] ^= 0x40;
    const uint64_t in_sector = i % 512;
    const bool stamp = in_sector < 8 || in_sector >= 504;
    const bool payload = !stamp && (i / 512) * kZilSectorPayload + in_sector - 8 < used;
    // A stamp keeps its other copy and bytes past `used` are not the block's: no loss.
    ASSERT_EQ(DecodeZilBlock(bad, 0xabcd, 9).ok(), !payload) << "byte " << i;
    if (payload) {
      EXPECT_EQ(ClassifyZilBlock(bad, 0xabcd, 9), ZilBlockState::kDamaged) << i;
    }
  }
}

TEST(ZilStampTest, ATearAtEverySectorBoundaryIsATear) {
  std::vector<uint8_t> data;
  const auto b = OneBlock(8, &data);
  // 3000 bytes and the headers fill 7 sectors; the 8th is padding the write stamps too.
  for (const uint8_t old : {0x00, 0x5a}) {
    for (size_t k = 0; k < 7; k++) {
      auto torn = b;
      std::fill(torn.begin() + k * 512, torn.end(), old);
      EXPECT_FALSE(DecodeZilBlock(torn, 0xabcd, 9).ok());
      EXPECT_EQ(ClassifyZilBlock(torn, 0xabcd, 9),
                k == 0 ? ZilBlockState::kUnwritten : ZilBlockState::kTorn)
          << k;
      // The cut sector reads back as an I/O error: a tear while an old sector follows it.
      std::vector<bool> unreadable(8, false);
      unreadable[k] = true;
      EXPECT_EQ(ClassifyZilBlock(torn, 0xabcd, 9, kZilFormatStamped, &unreadable),
                k == 0 ? ZilBlockState::kUnwritten : ZilBlockState::kTorn)
          << k;
    }
  }
  // Torn in the padding: every record is there, so the block is whole to its reader.
  auto padding = b;
  std::fill(padding.begin() + 7 * 512, padding.end(), 0);
  EXPECT_TRUE(DecodeZilBlock(padding, 0xabcd, 9).ok());
  // The last sector of the write unreadable, all before it written: cannot tell.
  std::vector<bool> last(8, false);
  last[7] = true;
  EXPECT_EQ(ClassifyZilBlock(padding, 0xabcd, 9, kZilFormatStamped, &last),
            ZilBlockState::kUnknown);
  // A block landed out of order (a later sector without an earlier one) is torn too.
  auto holes = b;
  std::fill(holes.begin() + 512, holes.begin() + 1024, 0);
  EXPECT_EQ(ClassifyZilBlock(holes, 0xabcd, 9), ZilBlockState::kTorn);
  // An unreadable sector inside a write otherwise whole: cannot tell.
  std::vector<bool> unreadable(8, false);
  unreadable[3] = true;
  EXPECT_EQ(ClassifyZilBlock(b, 0xabcd, 9, kZilFormatStamped, &unreadable),
            ZilBlockState::kUnknown);
}

TEST(ZilStampTest, TheMosVersionSaysWhichFormatAChainHas) {
  MosPhys mos;
  mos.txg = 5;
  DatasetPhys d;
  d.id = 1;
  d.name = "tank/v";
  d.guid = 7;
  d.volsize = 1 << 20;
  d.volblocksize = 4096;
  d.levels = 1;
  mos.datasets.push_back(d);
  auto plain = EncodeMos(mos);
  EXPECT_EQ(plain[7], 2) << "no chain: version 8 is not needed";
  mos.datasets[0].zil = ZilHeaderPhys{0x1234, 3, Dva{0, 256, 2 << 20}, 0, kZilFormatStamped};
  auto stamped = EncodeMos(mos);
  EXPECT_EQ(stamped[7], 8);
  auto back = DecodeMos(stamped);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->datasets[0].zil.format, kZilFormatStamped);
  // A chain an older volstack left (its MOS below version 8) is read as plain blocks.
  mos.datasets[0].zil.format = kZilFormatPlain;
  auto old = EncodeMos(mos);
  EXPECT_EQ(old[7], 2);
  back = DecodeMos(old);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->datasets[0].zil.format, kZilFormatPlain);
}

// --- crash and damage, through import ---

class ZilTearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fault = bdev::FaultDevice::CreateInMemory(kDev, 512, 5);
    PoolCreateOptions co;
    co.tuning = testing::TestTuning();
    auto created = Pool::Create("tank", {fault}, co);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    auto pool = *created;
    VolumeOptions vo;
    vo.volsize = 4 * kMiB;
    vo.volblocksize = 4096;
    ASSERT_TRUE(pool->CreateVolume("tank/v", vo).ok());
    auto vol = *pool->OpenVolume("tank/v");
    // The first flush commits a txg that starts the chain; the next two are log commits.
    ASSERT_TRUE(vol->Write(0, a_).ok());
    ASSERT_TRUE(vol->Flush().ok());
    const uint64_t txg = pool->Info().txg;
    ASSERT_TRUE(vol->Write(8192, b_).ok());
    ASSERT_TRUE(vol->Flush().ok());
    ASSERT_TRUE(vol->Write(16384, c_).ok());
    ASSERT_TRUE(fault->Flush().ok());
    auto forked = fault->Fork(1);
    ASSERT_TRUE(forked.ok()) << forked.status().ToString();
    before_ = *forked;
    ASSERT_TRUE(vol->Flush().ok());  // acknowledged: the last commit, in the log
    ASSERT_EQ(pool->Info().txg, txg) << "a flush committed a txg: no log";
    ASSERT_TRUE(fault->CutPower(bdev::CrashMode::kKeepAll).ok());
    vol.reset();
    pool->Close().IgnoreError();
    after_ = *fault->Reopen();
    ASSERT_TRUE(before_->CutPower(bdev::CrashMode::kKeepAll).ok());
    before_ = *before_->Reopen();
    // The last commit's log write: the sectors that differ (each is stamped anew).
    std::vector<uint8_t> x(kDev), y(kDev);
    ASSERT_TRUE(before_->Read(0, x).ok());
    ASSERT_TRUE(after_->Read(0, y).ok());
    uint64_t first = kDev, last = 0;
    for (uint64_t s = 0; s < kDev; s += 512) {
      if (std::memcmp(x.data() + s, y.data() + s, 512) != 0) {
        first = std::min(first, s);
        last = s + 512;
      }
    }
    ASSERT_LT(first, last);
    offset_ = first;
    sectors_ = (last - first) / 512;
    old_.assign(x.begin() + first, x.begin() + last);
    ASSERT_GE(sectors_, 9u);  // 4 KiB of data and the headers need 9 stamped sectors
  }

  std::shared_ptr<bdev::FaultDevice> Fork() { return *after_->Fork(2); }

  static Result<std::shared_ptr<Pool>> Import(std::shared_ptr<bdev::FaultDevice> dev,
                                              bool rewind = false) {
    PoolImportOptions io;
    io.tuning = testing::TestTuning();
    io.rewind = rewind;
    return Pool::Import({dev}, io);
  }

  // The volume holds a and b, and c exactly when `with_c`.
  void ExpectState(Pool& pool, bool with_b, bool with_c) {
    auto vol = *pool.OpenVolume("tank/v");
    std::vector<uint8_t> got(4096);
    ASSERT_TRUE(vol->Read(0, got).ok());
    EXPECT_TRUE(got == a_);
    ASSERT_TRUE(vol->Read(8192, got).ok());
    EXPECT_EQ(got == b_, with_b);
    ASSERT_TRUE(vol->Read(16384, got).ok());
    EXPECT_EQ(got == c_, with_c);
    testing::ExpectConsistent(pool);
  }

  const std::vector<uint8_t> a_ = Pattern(4096, 1), b_ = Pattern(4096, 2), c_ = Pattern(4096, 3);
  std::shared_ptr<bdev::FaultDevice> before_, after_;
  uint64_t offset_ = 0, sectors_ = 0;
  // The sectors of the last write holding its records (the rest is padding to 4 KiB).
  const uint64_t payload_sectors_ =
      ZilPhysSize(kZilFormatStamped,
                  kZilBlockHeaderSize + ZilRecordSize(ZilRecordType::kWrite, 4096)) /
      512;
  std::vector<uint8_t> old_;
};

TEST_F(ZilTearTest, ATornLastWriteReplaysToTheLastAcknowledgedCommit) {
  for (uint64_t k = 0; k <= sectors_; k++) {
    SCOPED_TRACE("torn after sector " + std::to_string(k));
    auto dev = Fork();
    if (k < sectors_) {
      ASSERT_TRUE(
          dev->Write(offset_ + k * 512, std::span<const uint8_t>(old_).subspan(k * 512)).ok());
      ASSERT_TRUE(dev->Flush().ok());
    }
    auto p = Import(dev);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_TRUE((*p)->import_report().log_losses.empty());
    // Torn in the padding, every record was written: replaying c is right too.
    ExpectState(**p, true, k >= payload_sectors_);
  }
}

TEST_F(ZilTearTest, ATornSectorReadingAsAnIoErrorIsATear) {
  for (uint64_t k = 0; k < sectors_; k++) {
    SCOPED_TRACE("cut in sector " + std::to_string(k));
    auto dev = Fork();
    ASSERT_TRUE(
        dev->Write(offset_ + k * 512, std::span<const uint8_t>(old_).subspan(k * 512)).ok());
    ASSERT_TRUE(dev->Flush().ok());
    bdev::FaultRule eio;
    eio.ops = bdev::OpBit(bdev::OpType::kRead);
    eio.offset = offset_ + k * 512;
    eio.length = 512;
    dev->AddFailRule(eio);
    auto p = Import(dev);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    ExpectState(**p, true, k >= payload_sectors_);
  }
  // An unreadable sector inside a write otherwise whole: the write may have been
  // acknowledged (a media error) or torn there, and these look alike, so the import refuses
  // and -F takes the loss.
  auto dev = Fork();
  bdev::FaultRule eio;
  eio.ops = bdev::OpBit(bdev::OpType::kRead);
  eio.offset = offset_ + 3 * 512;
  eio.length = 512;
  dev->AddFailRule(eio);
  dev->ResetCounters();
  auto p = Import(dev);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("zpool import -F"), std::string::npos)
      << p.status().ToString();
  EXPECT_EQ(dev->counters()[bdev::OpType::kWrite], 0u) << "a refused import wrote";
  p = Import(dev, /*rewind=*/true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ((*p)->import_report().log_losses.size(), 1u);
  EXPECT_NE((*p)->import_report().log_losses[0].find("cannot be read"), std::string::npos);
  ExpectState(**p, true, false);
}

TEST_F(ZilTearTest, ADamagedAcknowledgedBlockIsReportedNotTruncated) {
  // Every sector of the last (acknowledged) write: a byte of its payload, and of a stamp.
  for (uint64_t s = 0; s < sectors_; s++) {
    for (const uint64_t at : {uint64_t{200}, uint64_t{s % 2 == 0 ? 3u : 509u}}) {
      SCOPED_TRACE("sector " + std::to_string(s) + " byte " + std::to_string(at));
      auto dev = Fork();
      std::vector<uint8_t> sector(512);
      ASSERT_TRUE(dev->Read(offset_ + s * 512, sector).ok());
      sector[at] ^= 0x08;
      ASSERT_TRUE(dev->Write(offset_ + s * 512, sector).ok());
      ASSERT_TRUE(dev->Flush().ok());
      dev->ResetCounters();
      auto p = Import(dev);
      if (at != 200 || s >= payload_sectors_) {
        // A stamp keeps its other copy; bytes past the records are not the block's.
        ASSERT_TRUE(p.ok()) << p.status().ToString();
        ExpectState(**p, true, true);
        continue;
      }
      ASSERT_FALSE(p.ok()) << "an acknowledged log record was dropped silently";
      EXPECT_EQ(p.status().code(), EUCLEAN);
      EXPECT_NE(p.status().message().find("damaged"), std::string::npos) << p.status().ToString();
      EXPECT_EQ(dev->counters()[bdev::OpType::kWrite], 0u) << "a refused import wrote";
      if (s % 4 != 0) continue;  // -F on a few: each import commits
      p = Import(dev, /*rewind=*/true);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      ASSERT_EQ((*p)->import_report().log_losses.size(), 1u);
      EXPECT_NE((*p)->import_report().log_losses[0].find("tank/v"), std::string::npos);
      ExpectState(**p, true, false);
    }
  }
}

TEST_F(ZilTearTest, ADamagedEarlierBlockCutsTheChainThereWithRewindOnly) {
  // The block before the last write (commit b's): find it as the first stamped block the
  // chain names, by damaging each sector before the last write that holds b's data.
  auto dev = Fork();
  std::vector<uint8_t> image(kDev);
  ASSERT_TRUE(dev->Read(0, image).ok());
  const auto it = std::search(image.begin(), image.begin() + offset_, b_.begin(), b_.begin() + 64);
  ASSERT_NE(it, image.begin() + offset_) << "commit b's record not found before the last write";
  const uint64_t at = (it - image.begin() + 100) / 512 * 512;
  image[it - image.begin() + 100] ^= 1;
  ASSERT_TRUE(dev->Write(at, std::span<const uint8_t>(image).subspan(at, 512)).ok());
  ASSERT_TRUE(dev->Flush().ok());
  auto refused = Import(dev);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("damaged"), std::string::npos);
  auto p = Import(dev, /*rewind=*/true);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->import_report().log_losses.size(), 1u);
  ExpectState(**p, false, false);
}

}  // namespace
}  // namespace volstack::pool
