// Compression in the pool: what the commit stores for each kind of block (compressed,
// whole, hole), that every byte reads back (cached, from disk, after import), the space
// numbers (used, logicalused, compressratio) against what the test wrote, the property's
// rules (bad values change nothing, a change applies to later writes, clones keep it),
// the MOS version, and damage to a compressed block -> Corruption, never wrong bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "pool/cache_refill.h"
#include "pool/compress.h"
#include "pool/pool_impl.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::Random;
using testing::TestTuning;
using testing::Text;

constexpr uint32_t kVbs = 16384;

// 1 MiB of text, 1 MiB of random bytes, 1 MiB of zeroes, 1 MiB of blocks 3/4 random and
// 1/4 text.
std::vector<uint8_t> Mix() {
  std::vector<uint8_t> v = Text(kMiB, 1);
  auto r = Random(kMiB, 2);
  v.insert(v.end(), r.begin(), r.end());
  v.resize(3 * kMiB, 0);
  for (uint32_t b = 0; b < kMiB / kVbs; b++) {
    auto t = Text(kVbs / 4, 10 + b);
    auto p = Random(kVbs * 3 / 4, 100 + b);
    v.insert(v.end(), t.begin(), t.end());
    v.insert(v.end(), p.begin(), p.end());
  }
  return v;
}

struct Fixture {
  std::shared_ptr<bdev::FaultDevice> dev;
  std::shared_ptr<Pool> pool;
};

Fixture MakePool(bool cache_data = true) {
  Fixture f;
  f.dev = bdev::FaultDevice::CreateInMemory(256 * kMiB, 512, 1);
  PoolCreateOptions o;
  o.tuning = TestTuning();
  o.tuning.cache_data = cache_data;
  auto p = Pool::Create("trunk", {f.dev}, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  f.pool = *p;
  return f;
}

bdev::BlockDevicePtr MakeVolume(Pool& pool, const std::string& name, const std::string& comp) {
  VolumeOptions vo;
  vo.volsize = 16 * kMiB;
  vo.volblocksize = kVbs;
  vo.sparse = true;
  vo.props["logbias"] = "throughput";
  if (!comp.empty()) vo.props["compression"] = comp;
  auto d = pool.CreateVolume(name, vo);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  auto dev = pool.OpenVolume(name);
  EXPECT_TRUE(dev.ok()) << dev.status().ToString();
  return dev.ok() ? *dev : nullptr;
}

std::vector<BlockPtr> DataBps(Pool& pool, const std::string& name) {
  std::vector<BlockPtr> out;
  auto& vols = pool.impl()->volumes;
  EXPECT_TRUE(vols.count(name));
  EXPECT_TRUE(vols[name]
                  ->Walk([&](const BlockPtr& bp) {
                    if (bp.level == 0) out.push_back(bp);
                    return Status::Ok();
                  })
                  .ok());
  return out;
}

std::string Prop(Pool& pool, const std::string& ds, const std::string& prop) {
  auto d = pool.GetDataset(ds);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? d->props[prop] : "";
}

uint64_t Num(Pool& pool, const std::string& ds, const std::string& prop) {
  return std::stoull(Prop(pool, ds, prop));
}

class CompressPoolTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CompressPoolTest, MixIsStoredByKindAndReadsBackAfterImport) {
  const std::string setting = GetParam();
  const Compression algo = (*ParseCompression(setting)).algo;
  auto f = MakePool();
  auto dev = MakeVolume(*f.pool, "trunk/v", setting);
  const auto mix = Mix();
  ASSERT_TRUE(dev->Write(0, mix).ok());
  std::vector<uint8_t> back(mix.size());
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(dev->Read(0, back).ok());  // the commit's copies in the block cache
  EXPECT_EQ(back, mix);

  // 64 text blocks compressed, 64 random ones whole, 64 zero ones holes; the 3/4-random
  // blocks save more than 1/8 but under 4K of 16K: stored whole at ashift 12.
  const auto bps = DataBps(*f.pool, "trunk/v");
  ASSERT_EQ(bps.size(), 192u);
  uint64_t compressed = 0, whole = 0, psize_sum = 0, asize_sum = 0;
  for (const auto& bp : bps) {
    asize_sum += bp.dva[0].asize();
    EXPECT_EQ(bp.lsize, kVbs);
    if (bp.comp == Compression::kNone) {
      EXPECT_EQ(bp.psize, kVbs);
      whole++;
    } else {
      EXPECT_EQ(bp.comp, algo);
      EXPECT_LE(bp.dva[0].asize(), kVbs - 4096);
      psize_sum += bp.psize;
      compressed++;
    }
  }
  EXPECT_EQ(compressed, 64u);
  EXPECT_EQ(whole, 128u);
  EXPECT_LT(psize_sum, 64u * kVbs / 2);

  // used counts what is allocated, logicalused the blocks' 16K each, both with the same
  // indirect blocks (16K each: two L1 for blocks 0-255 and the L2 root of 1024 blocks).
  const uint64_t meta = Num(*f.pool, "trunk/v", "used") - asize_sum;
  EXPECT_EQ(meta, 3u * 16384);
  EXPECT_EQ(Num(*f.pool, "trunk/v", "logicalused"), 192u * kVbs + meta);
  EXPECT_EQ(Num(*f.pool, "trunk/v", "logicalreferenced"), 192u * kVbs + meta);
  const double ratio = double(192 * kVbs + meta) / double(asize_sum + meta);
  char want[32];
  std::snprintf(want, sizeof want, "%.2fx", std::floor(ratio * 100) / 100);
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "compressratio"), want);
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "refcompressratio"), want);
  EXPECT_GT(ratio, 1.15);
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "compression"), setting);
  ExpectConsistent(*f.pool);

  dev.reset();
  ASSERT_TRUE(f.pool->Export().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  auto p = Pool::Import({f.dev}, io);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto dev2 = *(*p)->OpenVolume("trunk/v");
  std::fill(back.begin(), back.end(), 0xee);
  ASSERT_TRUE(dev2->Read(0, back).ok());  // from disk: nothing cached after import
  EXPECT_EQ(back, mix);
  // Block by block, unaligned pieces too (partial reads of compressed blocks).
  for (uint64_t off = 1024; off + 7168 < mix.size(); off += 200704) {
    std::vector<uint8_t> part(7168);
    ASSERT_TRUE(dev2->Read(off, part).ok());
    EXPECT_TRUE(std::equal(part.begin(), part.end(), mix.begin() + off)) << off;
  }
  EXPECT_EQ(Prop(**p, "trunk/v", "compressratio"), want);
  ExpectConsistent(**p);
}

INSTANTIATE_TEST_SUITE_P(Codecs, CompressPoolTest,
                         ::testing::Values("lz4", "on", "zstd", "zstd-1", "zstd-fast"));

TEST(CompressPoolPropertyTest, SetAppliesToLaterWritesBadValuesChangeNothingClonesKeepIt) {
  auto f = MakePool();
  auto dev = MakeVolume(*f.pool, "trunk/v", "");
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "compression"), kDefaultCompression);
  const auto text = Text(kMiB, 3);
  ASSERT_TRUE(dev->Write(0, text).ok());
  // As in zfs, the setting a commit finds is what its blocks get: this one's is off.
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(f.pool->SetProperty("trunk/v", "compression", "zstd-19").ok());
  ASSERT_TRUE(dev->Write(kMiB, text).ok());
  ASSERT_TRUE(dev->Flush().ok());
  for (const char* bad : {"gzip", "zstd-20", "zstd-0", "ON"}) {
    Status st = f.pool->SetProperty("trunk/v", "compression", bad);
    EXPECT_EQ(st.code(), EINVAL) << bad;
  }
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "compression"), "zstd-19");
  VolumeOptions vo;
  vo.volsize = kMiB;
  vo.props["compression"] = "lz5";
  EXPECT_EQ(f.pool->CreateVolume("trunk/w", vo).status().code(), EINVAL);
  EXPECT_FALSE(f.pool->GetDataset("trunk/w").ok());

  // Blocks written before the change stay as they were written (off: the default).
  const auto bps = DataBps(*f.pool, "trunk/v");
  ASSERT_EQ(bps.size(), 128u);
  for (size_t i = 0; i < bps.size(); i++) {
    EXPECT_EQ(bps[i].comp, i < 64 ? Compression::kNone : Compression::kZstd) << i;
  }
  std::vector<uint8_t> back(kMiB);
  ASSERT_TRUE(dev->Read(0, back).ok());
  EXPECT_EQ(back, text);
  ASSERT_TRUE(dev->Read(kMiB, back).ok());
  EXPECT_EQ(back, text);

  // A clone keeps its origin's compression; one given its own keeps that.
  ASSERT_TRUE(f.pool->Snapshot({"trunk/v@s"}).ok());
  ASSERT_TRUE(f.pool->Clone("trunk/v@s", "trunk/c", {}).ok());
  EXPECT_EQ(Prop(*f.pool, "trunk/c", "compression"), "zstd-19");
  VolumeOptions own;
  own.props["compression"] = "lz4";
  ASSERT_TRUE(f.pool->Clone("trunk/v@s", "trunk/d", own).ok());
  EXPECT_EQ(Prop(*f.pool, "trunk/d", "compression"), "lz4");
  auto clone = *f.pool->OpenVolume("trunk/d");
  ASSERT_TRUE(clone->Write(2 * kMiB, text).ok());
  ASSERT_TRUE(clone->Flush().ok());
  for (const auto& bp : DataBps(*f.pool, "trunk/d")) {
    if (bp.birth > bps.back().birth) {
      EXPECT_EQ(bp.comp, Compression::kLz4);
    }
  }
  // The snapshot keeps the logical numbers of the tree it holds.
  EXPECT_EQ(Num(*f.pool, "trunk/v@s", "logicalreferenced"),
            Num(*f.pool, "trunk/v", "logicalreferenced"));
  // Inheriting goes back to the default, for later writes.
  ASSERT_TRUE(f.pool->InheritProperty("trunk/v", "compression").ok());
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "compression"), kDefaultCompression);
  ExpectConsistent(*f.pool);
}

// The MOS says it holds compressed blocks from the first compressed block on, not before.
// (Its version is 6 from the second txg on: the deferred frees, defer_map.h, outrank 5.)
TEST(CompressPoolFormatTest, MosVersion5OnlyOnceACompressedBlockExists) {
  auto f = MakePool();
  auto mos_version = [&] {
    PoolImpl& p = *f.pool->impl();
    std::vector<uint8_t> buf(p.mos_bp.lsize);
    EXPECT_TRUE(p.ReadBlock(p.mos_bp, buf.data()).ok());
    auto mos = DecodeMos(buf);
    EXPECT_TRUE(mos.ok());
    EXPECT_EQ(buf[7], 6);
    return mos.ok() && mos->compressed ? 5 : 2;
  };
  auto dev = MakeVolume(*f.pool, "trunk/v", "lz4");
  EXPECT_EQ(mos_version(), 2);
  ASSERT_TRUE(dev->Write(0, Pattern(kMiB, 5)).ok());  // incompressible: stored whole
  ASSERT_TRUE(dev->Flush().ok());
  EXPECT_EQ(mos_version(), 2);
  ASSERT_TRUE(dev->Write(0, Text(kVbs, 5)).ok());
  ASSERT_TRUE(dev->Flush().ok());
  EXPECT_EQ(mos_version(), 5);
  dev.reset();
  ASSERT_TRUE(f.pool->Export().ok());
  f.pool.reset();
  PoolImportOptions io;
  io.tuning = TestTuning();
  f.pool = *Pool::Import({f.dev}, io);
  ASSERT_TRUE(f.pool->SetProperty("trunk/v", "sync", "always").ok());  // a commit
  EXPECT_EQ(mos_version(), 5);
}

TEST(CompressPoolDamageTest, DamagedCompressedBlockIsCorruptionNeverWrongBytes) {
  auto f = MakePool(/*cache_data=*/false);
  auto dev = MakeVolume(*f.pool, "trunk/v", "lz4");
  const auto text = Text(2 * kVbs, 7);
  ASSERT_TRUE(dev->Write(0, text).ok());
  ASSERT_TRUE(dev->Flush().ok());
  const auto bps = DataBps(*f.pool, "trunk/v");
  ASSERT_EQ(bps.size(), 2u);
  ASSERT_NE(bps[0].comp, Compression::kNone);
  // One bit inside the stored stream of block 0; block 1 is untouched.
  ASSERT_TRUE(f.dev->FlipBits(bps[0].dva[0].offset, bps[0].psize, 1).ok());
  std::vector<uint8_t> back(kVbs, 0);
  EXPECT_TRUE(dev->Read(0, back).IsCorruption());
  std::vector<uint8_t> part(4096);
  EXPECT_TRUE(dev->Read(4096, part).IsCorruption());
  std::vector<uint8_t> both(2 * kVbs);
  EXPECT_TRUE(dev->Read(0, both).IsCorruption());
  ASSERT_TRUE(dev->Read(kVbs, back).ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), text.begin() + kVbs));
  EXPECT_EQ(f.pool->Info().vdevs[0].checksum_errors, 3u);
  auto r = *CheckPool(*f.pool, true);
  EXPECT_FALSE(r.ok());
}

// Without a data cache a part read decodes its block only up to the part's end
// (DecompressLz4Prefix): every part of every block, at every size and offset, reads back
// exactly, and a damaged block is still Corruption.
TEST(CompressPoolReadTest, PartReadsWithoutDataCacheReadBackEveryByte) {
  for (const char* codec : {"lz4", "zstd"}) {
    SCOPED_TRACE(codec);
    auto f = MakePool(/*cache_data=*/false);
    auto dev = MakeVolume(*f.pool, "trunk/v", codec);
    const auto text = Text(4 * kVbs, 21);
    ASSERT_TRUE(dev->Write(0, text).ok());
    ASSERT_TRUE(dev->Flush().ok());
    for (const BlockPtr& bp : DataBps(*f.pool, "trunk/v")) ASSERT_NE(bp.comp, Compression::kNone);
    for (uint64_t off = 0; off < text.size(); off += 512) {
      for (uint64_t len : {512, 4096, 12288}) {
        if (off + len > text.size()) continue;
        std::vector<uint8_t> got(len, 0xee);
        ASSERT_TRUE(dev->Read(off, got).ok()) << off << "+" << len;
        ASSERT_TRUE(std::equal(got.begin(), got.end(), text.begin() + off)) << off << "+" << len;
      }
    }
    const auto bps = DataBps(*f.pool, "trunk/v");
    ASSERT_TRUE(f.dev->FlipBits(bps[2].dva[0].offset, bps[2].psize, 1).ok());
    std::vector<uint8_t> part(4096);
    EXPECT_TRUE(dev->Read(2 * kVbs, part).IsCorruption());
  }
}

// A volume's logicalused and compressratio count what its snapshots alone hold;
// logicalreferenced and refcompressratio only its tree.
TEST(CompressPoolPropertyTest, LogicalUsedCountsSnapshotsBlocks) {
  auto f = MakePool();
  auto dev = MakeVolume(*f.pool, "trunk/v", "lz4");
  ASSERT_TRUE(dev->Write(0, Text(kMiB, 31)).ok());
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_TRUE(f.pool->Snapshot({"trunk/v@s"}).ok());
  ASSERT_TRUE(dev->Write(0, Random(kMiB, 32)).ok());  // every block replaced, stored whole
  ASSERT_TRUE(dev->Flush().ok());
  const uint64_t lref = Num(*f.pool, "trunk/v", "logicalreferenced");
  const uint64_t ref = Num(*f.pool, "trunk/v", "referenced");
  const uint64_t snap = Num(*f.pool, "trunk/v", "usedbysnapshots");
  EXPECT_EQ(lref, ref);  // random data and indirect blocks: nothing compressed
  EXPECT_EQ(lref, 64u * kVbs + 2 * 16384);
  // The snapshot alone holds the 64 text blocks (compressed) and the old L1 and L2.
  EXPECT_EQ(Num(*f.pool, "trunk/v", "logicalused"), lref + 64u * kVbs + 2 * 16384);
  EXPECT_LE(snap, 64u * kVbs / 2 + 2 * 16384);  // text: at most 8K of 16K each
  char want[32];
  const uint64_t r = (2 * lref) * 100 / (ref + snap);
  std::snprintf(want, sizeof want, "%llu.%02llux", static_cast<unsigned long long>(r / 100),
                static_cast<unsigned long long>(r % 100));
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "compressratio"), want);
  EXPECT_EQ(Prop(*f.pool, "trunk/v", "refcompressratio"), "1.00x");
  EXPECT_EQ(Num(*f.pool, "trunk/v@s", "logicalreferenced"), lref);
  EXPECT_EQ(Prop(*f.pool, "trunk", "compressratio"), want);  // the only volume
  ExpectConsistent(*f.pool);
}

// A compressed block the commit's cache copies left out is read back stored, verified on
// its psize bytes and decoded: the cache gets its logical bytes; a damaged one is skipped.
TEST(CompressPoolCacheTest, RefillReadsBackCompressedBlocksDecoded) {
  BlockCache cache(64 << 20, nullptr);
  const auto text = Text(kVbs, 21);
  std::vector<uint8_t> stored(kVbs, 0);
  const uint32_t psize = CompressBlock(*ParseCompression("lz4"), text, 4096, stored);
  ASSERT_GT(psize, 0u);
  const uint32_t asize = (psize + 4095) / 4096 * 4096;
  stored.resize(asize);
  std::map<uint64_t, std::vector<uint8_t>> vdev = {{1 << 22, stored}, {2 << 22, stored}};
  vdev[2 << 22][psize / 2] ^= 1;  // the second copy rotted
  CacheRefill refill(
      &cache,
      [&](uint32_t, uint64_t off, std::span<uint8_t> dst) {
        auto it = vdev.find(off);
        if (it == vdev.end() || dst.size() != it->second.size()) return Status::IoError("read");
        std::copy(it->second.begin(), it->second.end(), dst.begin());
        return Status::Ok();
      },
      64 << 20);
  const Checksum sum = ComputeChecksum(ChecksumType::kXxh3_128, std::span(stored.data(), psize));
  const BlockKey good{0, kVbs, 1 << 22, 5}, bad{0, kVbs, 2 << 22, 5};
  refill.Add(std::vector<WrittenBlock>{
      {good, ChecksumType::kXxh3_128, sum, Compression::kLz4, psize, asize},
      {bad, ChecksumType::kXxh3_128, sum, Compression::kLz4, psize, asize}});
  refill.WaitIdle();
  std::vector<uint8_t> got(kVbs);
  ASSERT_TRUE(cache.Lookup(good, got.data(), 0, kVbs, false));
  EXPECT_EQ(got, text);
  EXPECT_FALSE(cache.Lookup(bad, got.data(), 0, kVbs, false));
  EXPECT_EQ(refill.Stats().refilled, 1u);
  EXPECT_EQ(refill.Stats().mismatched, 1u);
}

}  // namespace
}  // namespace volstack::pool
