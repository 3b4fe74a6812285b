// The volume read path (volume_read.cc): requests mixing dirty, syncing, committed and hole
// blocks at unaligned offsets read back the model; adjacent committed blocks are read with
// one vdev read per 128 KiB; a bad block inside a merged run is still Corruption; reads keep the
// indirect cache within its bound; the block cache (block_cache.h) serves repeated reads without
// vdev I/O, holds exact copies of what a commit wrote and not what it freed, never outlives a
// corrupt block's eviction, never returns a freed block's old bytes, and stays within the pool's
// cache bound; zpool status's error counters count.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

#include "bdev/fault_device.h"
#include "bdev/memory_device.h"
#include "bdev/trace_device.h"
#include "pool/pool_impl.h"
#include "pool/spa.h"
#include "pool/test_util.h"

namespace volstack::pool {
namespace {

using testing::ExpectConsistent;
using testing::kMiB;
using testing::Pattern;
using testing::TestTuning;

struct Setup {
  std::shared_ptr<bdev::TraceDevice> trace;
  std::shared_ptr<Pool> pool;
  bdev::BlockDevicePtr dev;
};

Setup Make(bdev::BlockDevicePtr below, uint32_t vbs, uint64_t volsize, PoolTuning t) {
  Setup s;
  s.trace = bdev::TraceDevice::Create(std::move(below));
  PoolCreateOptions o;
  o.tuning = t;
  auto p = Pool::Create("trunk", {s.trace}, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  s.pool = *p;
  VolumeOptions vo;
  vo.volsize = volsize;
  vo.volblocksize = vbs;
  vo.sparse = true;
  EXPECT_TRUE(s.pool->CreateVolume("trunk/v", vo).ok());
  s.dev = *s.pool->OpenVolume("trunk/v");
  return s;
}

TEST(VolumeReadTest, MixedDirtyCommittedAndHolesMatchTheModel) {
  constexpr uint32_t kVbs = 4096;
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), kVbs, 4 * kMiB, TestTuning());
  std::vector<uint8_t> model(4 * kMiB, 0);
  auto put = [&](uint64_t off, const std::vector<uint8_t>& d) {
    ASSERT_TRUE(s.dev->Write(off, d).ok());
    std::copy(d.begin(), d.end(), model.begin() + static_cast<ptrdiff_t>(off));
  };
  put(0, Pattern(256 * kVbs, 1));  // blocks 0..255 committed below
  ASSERT_TRUE(s.dev->Flush().ok());
  put(5 * kVbs, Pattern(kVbs, 2));                        // dirty whole block
  put(6 * kVbs + 512, Pattern(1024, 3));                  // dirty partial block (read-modify-write)
  ASSERT_TRUE(s.dev->Discard(10 * kVbs, 2 * kVbs).ok());  // dirty holes
  std::fill(model.begin() + 10 * kVbs, model.begin() + 12 * kVbs, 0);
  put(300 * kVbs, Pattern(3 * kVbs, 4));  // dirty blocks after a never-written gap
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 200; i++) {
      const uint64_t off = (rng() % (model.size() / 512)) * 512;
      const uint64_t len =
          std::min<uint64_t>(((rng() % (96 * kVbs / 512)) + 1) * 512, model.size() - off);
      std::vector<uint8_t> back(len);
      ASSERT_TRUE(s.dev->Read(off, back).ok()) << off << "+" << len;
      ASSERT_TRUE(std::equal(back.begin(), back.end(), model.begin() + off)) << off << "+" << len;
    }
    ASSERT_TRUE(s.dev->Flush().ok());  // second round: everything committed
  }
  ExpectConsistent(*s.pool);
}

TEST(VolumeReadTest, AdjacentBlocksAreReadWithOneVdevRead) {
  PoolTuning t = TestTuning();
  t.cache_data = false;  // the warming read below would otherwise cache the blocks
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 4 * kMiB, t);
  auto d = Pattern(kMiB, 5);
  ASSERT_TRUE(s.dev->Write(0, d).ok());  // one txg: allocated back to back
  ASSERT_TRUE(s.dev->Flush().ok());
  std::vector<uint8_t> back(256 * 1024);
  ASSERT_TRUE(s.dev->Read(0, back).ok());  // warms the indirect cache
  s.trace->StartRecording();
  ASSERT_TRUE(s.dev->Read(64 * 1024, back).ok());
  auto events = s.trace->StopRecording();
  EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin() + 64 * 1024));
  // 64 adjacent blocks: runs of at most 128 KiB (kMaxRunBytes), so two vdev reads, not 64.
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_EQ(e.op, bdev::OpType::kRead);
    EXPECT_EQ(e.length, back.size() / 2);
  }
}

TEST(VolumeReadTest, BadBlockInsideAMergedRunIsCorruption) {
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, 3);
  PoolTuning t = TestTuning();
  t.cache_data = false;  // the rot is on disk; a cached copy would rightly answer
  auto s = Make(fault, 4096, 4 * kMiB, t);
  auto d = Pattern(64 * 4096, 6);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.dev->Flush().ok());
  BlockPtr victim;
  for (auto& [name, v] : s.pool->impl()->volumes) {
    uint64_t n = 0;
    ASSERT_TRUE(v->Walk([&](const BlockPtr& bp) {
                   if (bp.level == 0 && n++ == 20) victim = bp;
                   return Status::Ok();
                 }).ok());
  }
  ASSERT_FALSE(victim.IsHole());
  ASSERT_TRUE(fault->FlipBits(victim.dva[0].offset + 100, 8, 1).ok());
  std::vector<uint8_t> back(d.size());
  EXPECT_EQ(s.dev->Read(0, back).code(), EUCLEAN);  // Status::Corruption
  // The blocks around it still read.
  std::vector<uint8_t> head(20 * 4096);
  ASSERT_TRUE(s.dev->Read(0, head).ok());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), d.begin()));
}

TEST(VolumeReadTest, ReadsKeepTheIndirectCacheBounded) {
  PoolTuning t = TestTuning();
  t.cache_max_bytes = 8 * kIndirectBlockSize;
  constexpr uint32_t kVbs = 4096;
  auto s = Make(bdev::MemoryDevice::Create(128 * kMiB), kVbs, 32 * kMiB, t);
  // 32 MiB / 4 KiB = 8192 blocks = 64 L1 indirect blocks.
  auto d = Pattern(kMiB, 8);
  for (uint64_t off = 0; off < 32 * kMiB; off += kMiB) ASSERT_TRUE(s.dev->Write(off, d).ok());
  ASSERT_TRUE(s.dev->Flush().ok());
  std::vector<uint8_t> back(kVbs);
  for (uint64_t off = 0; off < 32 * kMiB; off += 128 * kVbs) {
    ASSERT_TRUE(s.dev->Read(off + kVbs, back).ok());
    EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin() + off % kMiB + kVbs));
    EXPECT_LE(s.pool->impl()->cache_bytes.load(), t.cache_max_bytes + kIndirectBlockSize);
  }
}

// Reads [0, out.size()) in requests of `chunk` bytes (the block cache serves requests of
// at most 128 KiB; longer ones are streams and bypass it).
Status ReadInChunks(bdev::BlockDevice& dev, std::vector<uint8_t>& out, size_t chunk) {
  for (size_t off = 0; off < out.size(); off += chunk) {
    VS_RETURN_IF_ERROR(
        dev.Read(off, std::span<uint8_t>(out.data() + off, std::min(chunk, out.size() - off))));
  }
  return Status::Ok();
}

// Where the tree says the data blocks of the volume are (blkid order).
std::vector<BlockPtr> DataBps(Pool& pool) {
  std::vector<BlockPtr> out;
  for (auto& [name, v] : pool.impl()->volumes) {
    EXPECT_TRUE(v->Walk([&](const BlockPtr& bp) {
                   if (bp.level == 0) out.push_back(bp);
                   return Status::Ok();
                 }).ok());
  }
  return out;
}

// A read caches what it missed at once when it faults the cache's memory in itself (no
// reserve: block_cache.h, "Readers wait for no fault").
PoolTuning ReadersCacheAtOnce() {
  PoolTuning t = TestTuning();
  t.cache_reserve = false;
  return t;
}

TEST(VolumeReadTest, CachedBlocksAreReadWithoutVdevIo) {
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 4 * kMiB, ReadersCacheAtOnce());
  auto d = Pattern(kMiB, 9);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();  // no refill reads while the trace below records
  std::vector<uint8_t> back(kMiB);
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 64 * 1024).ok());  // misses: read, verified, cached
  ASSERT_EQ(back, d);
  s.trace->StartRecording();
  std::fill(back.begin(), back.end(), 0);
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 64 * 1024).ok());
  std::vector<uint8_t> part(1536);
  ASSERT_TRUE(s.dev->Read(4096 * 3 + 512, part).ok());  // a partial block
  auto events = s.trace->StopRecording();
  EXPECT_EQ(back, d);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), d.begin() + 4096 * 3 + 512));
  EXPECT_EQ(events.size(), 0u);
  EXPECT_GE(s.pool->impl()->block_cache->Stats().hits, 256u);
  // A stream (one request longer than 128 KiB) admits nothing it missed...
  auto& cache = *s.pool->impl()->block_cache;
  cache.Clear();
  ASSERT_TRUE(s.dev->Read(0, back).ok());
  EXPECT_EQ(back, d);
  EXPECT_EQ(cache.Stats().entries, 0u);
  // ...but takes what the cache holds, without vdev I/O.
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 64 * 1024).ok());
  const uint64_t hits_before = cache.Stats().hits;
  s.trace->StartRecording();
  std::fill(back.begin(), back.end(), 0);
  ASSERT_TRUE(s.dev->Read(0, back).ok());
  EXPECT_EQ(s.trace->StopRecording().size(), 0u);
  EXPECT_EQ(back, d);
  EXPECT_EQ(cache.Stats().hits - hits_before, 256u);
}

// A partial write reads the old block to merge into (read-modify-write): from the cache
// when the cache holds it, but what it reads from the vdev it keeps out of the cache, as the
// commit replaces the block (and caches the new bytes itself).
TEST(VolumeReadTest, AReadModifyWriteDoesNotCacheTheOldBlock) {
  constexpr uint32_t kVbs = 16384;
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), kVbs, 4 * kMiB, ReadersCacheAtOnce());
  auto d = Pattern(kMiB, 12);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  PoolImpl& p = *s.pool->impl();
  p.FinishCacheFills();
  auto& cache = *p.block_cache;
  cache.Clear();
  const auto part = Pattern(4096, 13);
  const uint64_t rmw_before = p.rmw_reads.load();
  ASSERT_TRUE(s.dev->Write(kVbs * 5 + 4096, part).ok());
  EXPECT_EQ(p.rmw_reads.load() - rmw_before, 1u);
  EXPECT_EQ(cache.Stats().entries, 0u);
  // A read of the same kind of block does cache it.
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(s.dev->Read(kVbs * 6, back).ok());
  EXPECT_EQ(cache.Stats().entries, 1u);
  // Both blocks read back right, before and after their commit.
  for (int pass = 0; pass < 2; pass++) {
    std::vector<uint8_t> blocks(2 * kVbs);
    ASSERT_TRUE(s.dev->Read(kVbs * 5, blocks).ok());
    std::vector<uint8_t> want(d.begin() + kVbs * 5, d.begin() + kVbs * 7);
    std::copy(part.begin(), part.end(), want.begin() + 4096);
    EXPECT_TRUE(blocks == want) << "pass " << pass;
    ASSERT_TRUE(s.pool->Sync().ok());
  }
  ExpectConsistent(*s.pool, true);
}

// A volume holding `d`, committed, with nothing in the block cache: its reads start with
// misses, and readers' misses go into the cache at once.
Setup WrittenNothingCached(bdev::BlockDevicePtr below, uint32_t vbs,
                           const std::vector<uint8_t>& d) {
  auto s = Make(std::move(below), vbs, 4 * kMiB, ReadersCacheAtOnce());
  EXPECT_TRUE(s.dev->Write(0, d).ok());
  EXPECT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();
  s.pool->impl()->block_cache->Clear();
  return s;
}

uint64_t VolumeGuid(Setup& s) {
  std::lock_guard l(s.pool->impl()->mu);
  return s.pool->impl()->volumes.at("trunk/v")->phys().guid;
}

// A part of a block (4 KiB of a 16 KiB block) asks the cache once: a miss reads the whole
// block, verifies it and offers it; then any part of it is copied from the cache, without
// vdev I/O. A request's first block is named in the cache's hints by the volume's guid and
// the block's number.
TEST(VolumeReadTest, PartsOfACachedBlockAreCopiedFromTheCache) {
  auto d = Pattern(kMiB, 11);
  auto s = WrittenNothingCached(bdev::MemoryDevice::Create(64 * kMiB), 16384, d);
  auto& cache = *s.pool->impl()->block_cache;
  const auto before = cache.Stats();
  std::vector<uint8_t> part(4096);
  ASSERT_TRUE(s.dev->Read(16384 * 5 + 4096, part).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), d.begin() + 16384 * 5 + 4096));
  auto st = cache.Stats();
  EXPECT_EQ(st.misses - before.misses, 1u);  // not asked again by the read that filled it
  EXPECT_EQ(st.hits - before.hits, 0u);
  EXPECT_EQ(st.entries, 1u);
  s.trace->StartRecording();
  for (uint32_t off : {0u, 8192u, 12288u + 1024u}) {
    std::vector<uint8_t> p(2048);
    ASSERT_TRUE(s.dev->Read(16384 * 5 + off, p).ok());
    EXPECT_TRUE(std::equal(p.begin(), p.end(), d.begin() + 16384 * 5 + off));
  }
  EXPECT_EQ(s.trace->StopRecording().size(), 0u);
  EXPECT_EQ(cache.Stats().hits - before.hits, 3u);
  const uint8_t* at = cache.HintedBytes(VolumeGuid(s) + 5);
  ASSERT_NE(at, nullptr);
  EXPECT_TRUE(std::equal(d.begin() + 16384 * 5, d.begin() + 16384 * 6, at));
}

// A whole-block hit names the request's first block, and only that one.
TEST(VolumeReadTest, AReadNamesItsFirstBlockInTheCachesHints) {
  auto d = Pattern(kMiB, 12);
  auto s = WrittenNothingCached(bdev::MemoryDevice::Create(64 * kMiB), 4096, d);
  auto& cache = *s.pool->impl()->block_cache;
  std::vector<uint8_t> back(3 * 4096);
  for (int pass = 0; pass < 2; pass++) {  // misses, then hits
    ASSERT_TRUE(s.dev->Read(9 * 4096, back).ok());
    EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin() + 9 * 4096));
  }
  const uint64_t guid = VolumeGuid(s);
  const uint8_t* at = cache.HintedBytes(guid + 9);
  ASSERT_NE(at, nullptr);
  EXPECT_TRUE(std::equal(d.begin() + 9 * 4096, d.begin() + 10 * 4096, at));
  EXPECT_EQ(cache.HintedBytes(guid + 10), nullptr);
  EXPECT_EQ(cache.HintedBytes(guid + 11), nullptr);
}

// A read notes where it found the L1 blocks of its pointers; the next read under one of
// them starts loading its block's pointer from there before it takes any lock. L1 blocks
// kL1Hints apart share an entry.
TEST(VolumeReadTest, AReadNotesWhereItFoundItsBlocksPointers) {
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 1024 * kMiB, ReadersCacheAtOnce());
  auto d = Pattern(kMiB, 14);           // 256 blocks: L1 blocks 0 and 1
  const uint64_t far = 1024 * 128 + 3;  // under L1 block 1024, which shares 0's entry
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.dev->Write(far * 4096, std::span(d).first(4096)).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  const auto bps = DataBps(*s.pool);
  ASSERT_EQ(bps.size(), 257u);
  std::shared_ptr<Volume> vol;
  {
    std::lock_guard l(s.pool->impl()->mu);
    vol = s.pool->impl()->volumes.at("trunk/v");
  }
  auto pointer_at = [&](uint64_t blkid) {
    return reinterpret_cast<const PackedBlockPtr*>(vol->HintedPointerAddress(blkid));
  };
  vol->EvictClean();
  EXPECT_EQ(pointer_at(3), nullptr);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(s.dev->Read(3 * 4096, back).ok());  // loads L1 block 0, and notes it
  for (uint64_t blkid : {0u, 3u, 127u}) {
    ASSERT_NE(pointer_at(blkid), nullptr) << blkid;
    EXPECT_EQ(pointer_at(blkid)->Unpack(), bps[blkid]) << blkid;
  }
  EXPECT_EQ(pointer_at(128), nullptr);  // another L1 block, not read yet
  std::vector<uint8_t> across(4 * 4096);
  ASSERT_TRUE(s.dev->Read(126 * 4096, across).ok());  // under both
  EXPECT_TRUE(std::equal(across.begin(), across.end(), d.begin() + 126 * 4096));
  ASSERT_NE(pointer_at(200), nullptr);
  EXPECT_EQ(pointer_at(200)->Unpack(), bps[200]);
  ASSERT_TRUE(s.dev->Read(far * 4096, back).ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin()));
  ASSERT_NE(pointer_at(far), nullptr);
  EXPECT_EQ(pointer_at(far)->Unpack(), bps[256]);
  EXPECT_EQ(pointer_at(3), pointer_at(far));  // the shared entry names the last one found
  ASSERT_TRUE(s.dev->Read(3 * 4096, back).ok());
  EXPECT_EQ(pointer_at(3)->Unpack(), bps[3]);
  vol->EvictClean();  // the hints now name freed memory: prefetched, never read
  ASSERT_TRUE(s.dev->Read(3 * 4096, back).ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), d.begin() + 3 * 4096));
  EXPECT_EQ(pointer_at(3)->Unpack(), bps[3]);  // the L1 block loaded again, wherever it landed
}

// A part of a block read from the vdev is verified like a whole one: the cache's verified
// copy serves it after the block is damaged on disk; once evicted, the damage is Corruption.
TEST(VolumeReadTest, APartOfACorruptBlockIsCorruptionOnceEvicted) {
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, 4);
  auto d = Pattern(4 * 16384, 13);
  auto s = WrittenNothingCached(fault, 16384, d);
  auto& cache = *s.pool->impl()->block_cache;
  std::vector<uint8_t> part(4096);
  ASSERT_TRUE(s.dev->Read(2 * 16384 + 4096, part).ok());  // a miss: read, verified, cached
  auto bps = DataBps(*s.pool);
  ASSERT_EQ(bps.size(), 4u);
  ASSERT_TRUE(fault->FlipBits(bps[2].dva[0].offset + 10, 8, 1).ok());
  std::fill(part.begin(), part.end(), 0);
  ASSERT_TRUE(s.dev->Read(2 * 16384 + 4096, part).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), d.begin() + 2 * 16384 + 4096));
  EXPECT_EQ(s.pool->Info().vdevs[0].checksum_errors, 0u);
  cache.Clear();
  EXPECT_EQ(s.dev->Read(2 * 16384 + 4096, part).code(), EUCLEAN);
  EXPECT_GE(s.pool->Info().vdevs[0].checksum_errors, 1u);
  ASSERT_TRUE(s.dev->Read(16384 + 8192, part).ok());  // a neighbour still reads
  EXPECT_TRUE(std::equal(part.begin(), part.end(), d.begin() + 16384 + 8192));
}

// A stream's miss right after a hit is a hole in what the cache holds: its run ends at the
// next cached block, so only the missing block is read. Past a miss a stream reads whole
// runs without asking the cache about each block (one lookup per 128 KiB run).
TEST(VolumeReadTest, AStreamReadsOnlyTheHolesInWhatTheCacheHolds) {
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 4 * kMiB, ReadersCacheAtOnce());
  auto d = Pattern(kMiB, 4);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();
  auto& cache = *s.pool->impl()->block_cache;
  std::vector<uint8_t> back(kMiB);
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 64 * 1024).ok());  // every block cached
  const std::vector<BlockPtr> bps = DataBps(*s.pool);
  ASSERT_EQ(bps.size(), 256u);
  cache.Forget(PoolImpl::CacheKey(bps[100]));
  cache.Forget(PoolImpl::CacheKey(bps[200]));
  cache.Forget(PoolImpl::CacheKey(bps[201]));
  s.trace->StartRecording();
  std::fill(back.begin(), back.end(), 0);
  ASSERT_TRUE(s.dev->Read(0, back).ok());
  auto events = s.trace->StopRecording();
  EXPECT_EQ(back, d);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].offset, bps[100].dva[0].offset);
  EXPECT_EQ(events[0].length, 4096u);
  EXPECT_EQ(events[1].offset, bps[200].dva[0].offset);
  EXPECT_EQ(events[1].length, 8192u);

  cache.Clear();
  const uint64_t misses_before = cache.Stats().misses;
  ASSERT_TRUE(s.dev->Read(0, back).ok());
  EXPECT_EQ(back, d);
  EXPECT_EQ(cache.Stats().misses - misses_before, kMiB / (128 * 1024));
}

// Writes `data` at 0, commits, and expects the block cache to hold exactly `entries`
// blocks and to serve the range back with no vdev I/O.
void WriteCommitAndReadFromCache(Setup& s, const std::vector<uint8_t>& data, uint64_t entries) {
  ASSERT_TRUE(s.dev->Write(0, data).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  EXPECT_EQ(s.pool->impl()->block_cache->Stats().entries, entries);
  std::vector<uint8_t> back(data.size());
  s.trace->StartRecording();
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 4096).ok());
  EXPECT_EQ(s.trace->StopRecording().size(), 0u);
  EXPECT_EQ(back, data);
}

// The commit offers what it writes to the block cache. A small txg's blocks are copied
// before the commit returns, so they read with no vdev I/O. A large txg's are copied on a
// thread of their own, which the commit stops once durable without waiting for the copy in
// flight (FinishCacheFills waits for it here): some may be left out, but the copies are
// exact, and the next txg's writes reuse the buffers (cache_fill_test.cc has the race).
TEST(VolumeReadTest, TheCommitCachesWhatItWrites) {
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 32 * kMiB, TestTuning());
  auto& cache = *s.pool->impl()->block_cache;
  auto small = Pattern(256 * 1024, 14);
  WriteCommitAndReadFromCache(s, small, small.size() / 4096);

  const uint64_t big_size = 8 * kMiB;
  auto first = Pattern(big_size, 15), second = Pattern(big_size, 16);
  ASSERT_TRUE(s.dev->Write(kMiB, first).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();
  const uint64_t entries = cache.Stats().entries;
  EXPECT_LE(entries, (small.size() + big_size) / 4096);
  ASSERT_TRUE(s.dev->Write(kMiB + big_size, second).ok());  // into the recycled buffers
  EXPECT_EQ(cache.Stats().entries, entries);
  auto read_back = [&](uint64_t at, const std::vector<uint8_t>& want) {
    std::vector<uint8_t> got(4096);
    for (uint64_t off = 0; off < want.size(); off += got.size()) {
      ASSERT_TRUE(s.dev->Read(at + off, got).ok());
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin() + off)) << "at " << at + off;
    }
  };
  read_back(kMiB, first);
  ASSERT_TRUE(s.pool->Sync().ok());
  read_back(kMiB, first);
  read_back(kMiB + big_size, second);
}

// A commit that frees a block (its data was overwritten) drops it from the block cache: the
// cache holds the new version, not both.
TEST(VolumeReadTest, AnOverwrittenBlockLeavesTheCache) {
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 4 * kMiB, TestTuning());
  const uint64_t blocks = 64;
  WriteCommitAndReadFromCache(s, Pattern(blocks * 4096, 17), blocks);
  WriteCommitAndReadFromCache(s, Pattern(blocks * 4096, 18), blocks);  // not 2 x blocks
}

// A large txg's overwrites and a destroyed volume's blocks leave the cache too: the first
// max_queued_forgets of a commit are left to its cache fill (which runs them all even when
// stopped), the rest the commit forgets itself.
TEST(VolumeReadTest, FreedBlocksOfALargeTxgLeaveTheCache) {
  PoolTuning t = ReadersCacheAtOnce();
  t.max_queued_forgets = 100;
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 4096, 8 * kMiB, t);
  auto& cache = *s.pool->impl()->block_cache;
  const uint64_t size = 4 * kMiB, blocks = size / 4096;
  std::vector<uint8_t> back(size);
  auto cached_keys = [&] {
    std::vector<BlockKey> keys;
    EXPECT_TRUE(s.pool->impl()
                    ->volumes.begin()
                    ->second
                    ->Walk([&](const BlockPtr& bp) {
                      if (bp.type == BlockType::kVolData) keys.push_back(PoolImpl::CacheKey(bp));
                      return Status::Ok();
                    })
                    .ok());
    return keys;
  };
  ASSERT_TRUE(s.dev->Write(0, Pattern(size, 20)).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 4096).ok());  // every block into the cache
  const auto old_keys = cached_keys();
  ASSERT_EQ(cache.Stats().entries, blocks);
  ASSERT_TRUE(s.dev->Write(0, Pattern(size, 21)).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();
  std::vector<uint8_t> got(4096);
  for (const BlockKey& key : old_keys) ASSERT_FALSE(cache.Lookup(key, got.data(), 0, 4096));
  ASSERT_TRUE(ReadInChunks(*s.dev, back, 4096).ok());
  EXPECT_EQ(cache.Stats().entries, blocks);
  s.dev.reset();
  ASSERT_TRUE(s.pool->DestroyVolume("trunk/v").ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  s.pool->impl()->FinishCacheFills();
  EXPECT_EQ(cache.Stats().entries, 0u);
}

TEST(VolumeReadTest, CorruptBlockIsStillCorruptionOnceEvicted) {
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, 4);
  auto s = Make(fault, 4096, 4 * kMiB, TestTuning());
  auto d = Pattern(8 * 4096, 10);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  std::vector<uint8_t> back(d.size());
  ASSERT_TRUE(s.dev->Read(0, back).ok());  // cached, verified
  auto bps = DataBps(*s.pool);
  ASSERT_EQ(bps.size(), 8u);
  ASSERT_TRUE(fault->FlipBits(bps[3].dva[0].offset + 10, 8, 1).ok());
  // The cache holds the verified bytes: still right, not re-read.
  ASSERT_TRUE(s.dev->Read(0, back).ok());
  EXPECT_EQ(back, d);
  EXPECT_EQ(s.pool->Info().vdevs[0].checksum_errors, 0u);
  // Evicted, the block comes from disk again, and the damage shows.
  s.pool->impl()->block_cache->Clear();
  EXPECT_EQ(s.dev->Read(0, back).code(), EUCLEAN);
  std::vector<uint8_t> one(4096);
  EXPECT_EQ(s.dev->Read(3 * 4096, one).code(), EUCLEAN);
  const auto info = s.pool->Info();
  EXPECT_GE(info.vdevs[0].checksum_errors, 2u);
  EXPECT_EQ(info.vdevs[0].read_errors, 0u);
  EXPECT_EQ(info.vdevs[0].write_errors, 0u);
  // Its neighbours still read (and were not damaged by the failure).
  ASSERT_TRUE(s.dev->Read(4 * 4096, one).ok());
  EXPECT_TRUE(std::equal(one.begin(), one.end(), d.begin() + 4 * 4096));
}

TEST(VolumeReadTest, FreedAndReusedSpaceNeverReturnsOldBytes) {
  // A small vdev, so rewrites soon reuse freed space; every read after each commit fills the
  // cache with the current blocks, which the next rewrites free.
  constexpr uint32_t kVbs = 4096;
  constexpr uint64_t kVol = 2 * kMiB;
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), kVbs, kVol, TestTuning());
  std::vector<uint8_t> model(kVol, 0);
  std::map<uint64_t, uint64_t> birth_at;  // vdev offset -> birth txg last seen there
  int reused = 0;
  std::mt19937_64 rng(11);
  std::vector<uint8_t> back(kVol);
  for (int txg = 0; txg < 50; txg++) {
    for (int i = 0; i < 512; i++) {
      const uint64_t off = (rng() % (kVol / kVbs)) * kVbs;
      std::vector<uint8_t> d(kVbs, static_cast<uint8_t>(rng()));
      const uint64_t stamp = rng();
      std::memcpy(d.data() + 8 * (stamp % 500), &stamp, 8);
      ASSERT_TRUE(s.dev->Write(off, d).ok());
      std::copy(d.begin(), d.end(), model.begin() + static_cast<ptrdiff_t>(off));
    }
    ASSERT_TRUE(s.pool->Sync().ok());
    ASSERT_TRUE(ReadInChunks(*s.dev, back, 32 * 1024).ok());
    ASSERT_EQ(back, model) << "after txg " << txg;
    for (const auto& bp : DataBps(*s.pool)) {
      auto [it, fresh] = birth_at.try_emplace(bp.dva[0].offset, bp.birth);
      if (!fresh && it->second != bp.birth) {
        reused++;
        it->second = bp.birth;
      }
    }
  }
  EXPECT_GT(reused, 100);  // the test did exercise reuse of cached addresses
  EXPECT_GT(s.pool->impl()->block_cache->Stats().hits, 1000u);
}

TEST(VolumeReadTest, DataCacheStaysWithinThePoolCacheBound) {
  PoolTuning t = TestTuning();
  t.cache_max_bytes = 2 * kMiB;
  auto s = Make(bdev::MemoryDevice::Create(64 * kMiB), 16384, 16 * kMiB, t);
  auto d = Pattern(kMiB, 12);
  for (uint64_t off = 0; off < 16 * kMiB; off += kMiB) ASSERT_TRUE(s.dev->Write(off, d).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  std::vector<uint8_t> back(128 * 1024);
  for (int round = 0; round < 3; round++) {
    for (uint64_t off = 0; off < 16 * kMiB; off += back.size()) {
      ASSERT_TRUE(s.dev->Read(off, back).ok());
      ASSERT_TRUE(std::equal(back.begin(), back.end(), d.begin() + off % kMiB));
      PoolImpl& p = *s.pool->impl();
      EXPECT_LE(p.block_cache->bytes() + p.cache_bytes.load(), t.cache_max_bytes);
    }
  }
  EXPECT_GT(s.pool->impl()->block_cache->Stats().entries, 0u);
}

TEST(VolumeReadTest, VdevReadErrorsAreCounted) {
  auto fault = bdev::FaultDevice::CreateInMemory(64 * kMiB, 512, 5);
  PoolTuning t = TestTuning();
  t.cache_data = false;
  auto s = Make(fault, 4096, 4 * kMiB, t);
  auto d = Pattern(4 * 4096, 13);
  ASSERT_TRUE(s.dev->Write(0, d).ok());
  ASSERT_TRUE(s.pool->Sync().ok());
  EXPECT_EQ(s.pool->impl()->block_cache, nullptr);
  fault->FailOps(bdev::OpBit(bdev::OpType::kRead));
  std::vector<uint8_t> back(4096);
  EXPECT_FALSE(s.dev->Read(0, back).ok());
  EXPECT_GE(s.pool->Info().vdevs[0].read_errors, 1u);
}

}  // namespace
}  // namespace volstack::pool
