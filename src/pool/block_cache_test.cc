// BlockCache (block_cache.h): hits return the bytes inserted, the bound (shared with the
// indirect cache) holds, a scan does not wipe a hot set, a popular block gets in, and a
// forgotten (freed) block makes room for a new one.
#include "pool/block_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace volstack::pool {
namespace {

constexpr uint64_t kMiB = 1 << 20;

BlockKey Key(uint64_t i, uint32_t size = 4096) {
  return BlockKey{0, size, (1 << 22) + i * size, 7};
}

std::vector<uint8_t> Block(uint64_t i, uint32_t size = 4096) {
  std::vector<uint8_t> b(size);
  for (size_t k = 0; k < b.size(); k++) b[k] = static_cast<uint8_t>(i * 131 + k * 7);
  return b;
}

TEST(BlockCacheTest, HitReturnsTheBytesAndMissesDoNot) {
  BlockCache c(4 * kMiB, nullptr);
  auto b = Block(1);
  std::vector<uint8_t> out(4096, 0);
  EXPECT_FALSE(c.Lookup(Key(1), out.data(), 0, 4096));
  c.Insert(Key(1), b.data(), false);
  ASSERT_TRUE(c.Lookup(Key(1), out.data(), 0, 4096));
  EXPECT_EQ(out, b);
  // A piece of the block.
  std::vector<uint8_t> piece(512);
  ASSERT_TRUE(c.Lookup(Key(1), piece.data(), 1024, 512));
  EXPECT_TRUE(std::equal(piece.begin(), piece.end(), b.begin() + 1024));
  // Same offset, other birth (the space was freed and reused): a different block.
  BlockKey reborn = Key(1);
  reborn.birth = 8;
  EXPECT_FALSE(c.Lookup(reborn, out.data(), 0, 4096));
  BlockKey other_vdev = Key(1);
  other_vdev.vdev = 1;
  EXPECT_FALSE(c.Lookup(other_vdev, out.data(), 0, 4096));
  const auto st = c.Stats();
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.misses, 3u);
  EXPECT_EQ(st.entries, 1u);
  c.Clear();
  EXPECT_FALSE(c.Lookup(Key(1), out.data(), 0, 4096));
  EXPECT_EQ(c.Stats().entries, 0u);
}

// A slot holds a key in three words (block_cache.cc, "A slot packs"): keys at the fields'
// limits are held exactly, evicted and found again; a key past them is never cached, and
// never mistaken for the held key it would wrap onto.
TEST(BlockCacheTest, ASlotHoldsKeysUpToItsFieldsLimitsAndNoneBeyond) {
  BlockCache c(4 * kMiB, nullptr);
  std::vector<uint8_t> out(128 * 1024);
  const uint64_t last_offset = ((uint64_t{1} << 44) - 1) * 512;  // the last sector of 8 PiB
  const BlockKey limits[] = {
      BlockKey{65535, 4096, 1 << 22, 7},
      BlockKey{0, 4096, last_offset, 7},
      BlockKey{0, 4096, 1 << 22, ~uint64_t{0}},
      BlockKey{0, 128 * 1024, 1 << 23, 7},
  };
  for (size_t i = 0; i < std::size(limits); i++) {
    const auto b = Block(i, limits[i].size);
    ASSERT_TRUE(c.Insert(limits[i], b.data(), false));
    ASSERT_TRUE(c.Lookup(limits[i], out.data(), 0, limits[i].size)) << i;
    EXPECT_TRUE(std::equal(b.begin(), b.end(), out.begin())) << i;
  }
  EXPECT_EQ(c.Stats().entries, std::size(limits));
  // Forgetting one leaves the others found (a later member of its probe run moves back by
  // the key as held).
  c.Forget(limits[0]);
  EXPECT_FALSE(c.Lookup(limits[0], out.data(), 0, 4096));
  for (size_t i = 1; i < std::size(limits); i++) {
    EXPECT_TRUE(c.Lookup(limits[i], out.data(), 0, limits[i].size)) << i;
  }

  // Past the limits, in a small cache about half full: probe runs are long enough that some
  // lookups of a key wrapping onto a held one (in its shard) pass that key's slot.
  BlockCache small(1 * kMiB, nullptr);
  constexpr int kHeld = 208;  // 13 a shard, of at most 14
  for (int i = 0; i < kHeld; i++) small.Insert(Key(i), Block(i).data(), false);
  ASSERT_EQ(small.Stats().entries, uint64_t{kHeld});
  for (int i = 0; i < kHeld; i++) {
    BlockKey vdev_past = Key(i), offset_past = Key(i), off_sector = Key(i), odd_size = Key(i);
    vdev_past.vdev = 65536;                   // wraps onto vdev 0
    offset_past.offset += uint64_t{1} << 53;  // wraps onto the held offset (another region)
    off_sector.offset += 100;
    odd_size.size += 100;
    for (const BlockKey& k : {vdev_past, offset_past, off_sector, odd_size}) {
      ASSERT_FALSE(small.Lookup(k, out.data(), 0, 4096)) << i;
      small.Forget(k);  // forgets nothing held
    }
  }
  ASSERT_EQ(small.Stats().entries, uint64_t{kHeld});
  const auto before = small.Stats();
  BlockKey vdev_past = Key(0), off_sector = Key(0), odd_size = Key(0);
  vdev_past.vdev = 65536;
  off_sector.offset += 100;
  odd_size.size += 100;
  for (const BlockKey& k : {vdev_past, off_sector, odd_size}) {
    const auto other = Block(kHeld, k.size);
    EXPECT_TRUE(small.Insert(k, other.data(), false));  // refused, not left for later
    EXPECT_FALSE(small.Lookup(k, out.data(), 0, 4096));
  }
  const auto after = small.Stats();
  EXPECT_EQ(after.entries, before.entries);
  EXPECT_EQ(after.rejected - before.rejected, 3u);
  for (int i = 0; i < kHeld; i++) {
    ASSERT_TRUE(small.Lookup(Key(i), out.data(), 0, 4096)) << i;
    const auto b = Block(i);
    ASSERT_TRUE(std::equal(b.begin(), b.end(), out.begin())) << i;
  }
}

// A named hit records where the block's bytes are; a miss or an unnamed hit records
// nothing.
TEST(BlockCacheTest, ANamedHitRecordsWhereTheBytesAre) {
  BlockCache c(4 * kMiB, nullptr);
  auto b1 = Block(1), b2 = Block(2);
  std::vector<uint8_t> out(4096, 0);
  EXPECT_FALSE(c.Lookup(Key(1), out.data(), 0, 4096, true, /*name=*/5));
  EXPECT_EQ(c.HintedBytes(5), nullptr);
  c.Insert(Key(1), b1.data(), false);
  c.Insert(Key(2), b2.data(), false);
  ASSERT_TRUE(c.Lookup(Key(2), out.data(), 0, 4096));
  EXPECT_EQ(c.HintedBytes(BlockCache::kUnnamed), nullptr);
  ASSERT_TRUE(c.Lookup(Key(1), out.data(), 512, 1024, true, 5));
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 1024, b1.begin() + 512));
  const uint8_t* at = c.HintedBytes(5);
  ASSERT_NE(at, nullptr);
  EXPECT_TRUE(std::equal(b1.begin(), b1.end(), at));
  // The same name found elsewhere (its block was rewritten): the hint follows.
  ASSERT_TRUE(c.Lookup(Key(2), out.data(), 0, 4096, true, 5));
  const uint8_t* at2 = c.HintedBytes(5);
  ASSERT_NE(at2, nullptr);
  EXPECT_TRUE(std::equal(b2.begin(), b2.end(), at2));
  // A block bigger than half a chunk is malloc'd: its hint holds its exact address too.
  auto big = Block(3, 128 * 1024);
  c.Insert(Key(3, 128 * 1024), big.data(), false);
  ASSERT_TRUE(c.Lookup(Key(3, 128 * 1024), out.data(), 0, 4096, true, 6));
  ASSERT_NE(c.HintedBytes(6), nullptr);
  EXPECT_TRUE(std::equal(big.begin(), big.end(), c.HintedBytes(6)));
  EXPECT_EQ(c.HintedBytes(5), at2);  // another name's hint is its own
  c.Forget(Key(2));
  EXPECT_FALSE(c.Lookup(Key(2), out.data(), 0, 4096, true, 5));
  EXPECT_EQ(c.HintedBytes(5), at2);  // a miss leaves it, stale
  c.Clear();  // a stale hint (its bytes freed, perhaps unmapped) is only prefetched
  c.PrefetchNamed(5, 4095);
}

// A hint packs the bytes' address and the slot's index in one word (block_cache.h,
// "Hints"), exactly at the fields' limits, and holds no slot past them.
TEST(BlockCacheTest, AHintPacksBothAddressesInOneWord) {
  constexpr uint64_t kLastSlot = BlockCache::kHintSlotMask - 1;
  for (const uintptr_t data :
       {uintptr_t{16}, uintptr_t{0x7fff'ffff'f000}, uintptr_t{0xffff'ffff'fff0}}) {
    for (const uint64_t slot : {uint64_t{0}, uint64_t{1}, kLastSlot}) {
      const uint64_t hint = BlockCache::PackHint(data, slot);
      EXPECT_NE(hint, 0u);
      EXPECT_EQ(BlockCache::HintedData(hint), data);
      EXPECT_EQ(BlockCache::HintedSlot(hint), std::optional<uint64_t>(slot));
    }
    const uint64_t unslotted = BlockCache::PackHint(data, kLastSlot + 1);
    EXPECT_EQ(BlockCache::HintedData(unslotted), data);
    EXPECT_EQ(BlockCache::HintedSlot(unslotted), std::nullopt);
  }
  EXPECT_EQ(BlockCache::PackHint(0x1008, 3), 0u);  // not 16-byte aligned
  EXPECT_EQ(BlockCache::PackHint(uintptr_t{1} << 48, 3), 0u);
}

// A full cache refuses a block seen once, unless blocks the pool freed are forgotten first.
// (Every other block is forgotten, so each shard has room again whatever the shards' spread.)
TEST(BlockCacheTest, ForgottenBlocksMakeRoomForNewOnes) {
  BlockCache c(2 * kMiB, nullptr);
  uint64_t n = 0;
  while (c.Stats().rejected == 0) {
    c.Insert(Key(n), Block(n).data(), true);
    n++;
  }
  const uint64_t full = c.Stats().entries;
  ASSERT_GT(full, 100u);
  uint64_t forgotten = 0;
  for (uint64_t i = 0; i < n; i += 2) {
    std::vector<uint8_t> probe(4096);
    if (c.Lookup(Key(i), probe.data(), 0, 4096, /*count_access=*/false)) forgotten++;
    c.Forget(Key(i));
  }
  c.Forget(Key(n + 100));  // never cached: nothing happens
  EXPECT_EQ(c.Stats().entries, full - forgotten);
  ASSERT_GT(forgotten, 40u);
  for (uint64_t i = n + 1; i < n + 11; i++) c.Insert(Key(i), Block(i).data(), true);
  const auto st = c.Stats();
  EXPECT_EQ(st.rejected, 1u);  // only the first, before the forgets
  EXPECT_EQ(st.entries, full - forgotten + 10);
  EXPECT_LE(st.bytes, 2 * kMiB);
  std::vector<uint8_t> out(4096);
  for (uint64_t i = 0; i + 1 < n; i++) {
    ASSERT_EQ(c.Lookup(Key(i), out.data(), 0, 4096), i % 2 == 1) << i;
    if (i % 2 == 1) {
      ASSERT_EQ(out, Block(i)) << i;
    }
  }
  for (uint64_t i = n + 1; i < n + 11; i++) {
    ASSERT_TRUE(c.Lookup(Key(i), out.data(), 0, 4096)) << i;
    ASSERT_EQ(out, Block(i)) << i;
  }
}

TEST(BlockCacheTest, StaysWithinTheBoundSharedWithTheIndirectCache) {
  std::atomic<uint64_t> indirect{kMiB};
  const uint64_t max = 4 * kMiB;
  BlockCache c(max, &indirect);
  std::vector<uint8_t> out(16384);
  for (uint64_t i = 0; i < 4000; i++) {
    const uint32_t size = i % 3 == 0 ? 16384 : 4096;
    auto b = Block(i, size);
    c.Lookup(Key(i, size), out.data(), 0, size);
    c.Insert(Key(i, size), b.data(), false);
    ASSERT_LE(c.bytes() + indirect.load(), max) << i;
  }
  EXPECT_GT(c.Stats().entries, 100u);
  // The indirect cache grows: the block cache gives the memory back as it is used.
  indirect = 3 * kMiB;
  for (uint64_t i = 0; i < 4000; i++) c.Lookup(Key(i), out.data(), 0, 4096);
  EXPECT_LE(c.bytes() + indirect.load(), max);
  indirect = max;
  for (uint64_t i = 0; i < 4000; i++) c.Lookup(Key(i), out.data(), 0, 4096);
  EXPECT_EQ(c.Stats().entries, 0u);
}

// A shard keeps one emptied chunk mapped as a spare (block_arena.h); when the indirect
// cache takes the share back, inserts give the spares back too, not only lookups.
TEST(BlockCacheTest, SparesGoBackWhenTheShareShrinks) {
  std::atomic<uint64_t> indirect{0};
  const uint64_t max = 4 * kMiB;
  BlockCache c(max, &indirect);
  for (uint64_t i = 0; i < 600; i++) c.Insert(Key(i), Block(i).data(), false);
  for (uint64_t i = 0; i < 600; i++) c.Forget(Key(i));  // each shard keeps a spare
  indirect = max - 128 * 1024;  // the block cache's share: little more than its tables
  for (uint64_t i = 1000; i < 3000; i++) c.Insert(Key(i), Block(i).data(), false);
  EXPECT_LE(c.bytes() + indirect.load(), max);
}

// Blocks written side by side (a volume written through) are spread evenly over the
// shards, and the shares are whole chunks, so a cache offered as much as it can hold keeps
// nearly all of it: with shards by a hash of the region and equal shares (each rounded
// down to whole chunks) it kept 89 % (it now keeps 97.6 %).
TEST(BlockCacheTest, ContiguousBlocksFillTheWholeCapacity) {
  BlockCache c(32 * kMiB, nullptr);
  const uint64_t n = c.capacity() / 4096;
  for (uint64_t i = 0; i < n; i++) c.Insert(Key(i), Block(i).data(), true);
  EXPECT_GE(c.Stats().entries * 4096, c.capacity() / 100 * 95);
  EXPECT_LE(c.bytes(), 32 * kMiB);
}

// Waits (up to 10 s) until the cache's bytes() equals `want`; returns the last value seen.
uint64_t AwaitBytes(const BlockCache& c, uint64_t want) {
  for (int i = 0; i < 1000 && c.bytes() != want; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return c.bytes();
}

// The reserve (block_cache.h) keeps one chunk faulted in ahead of need in every shard, and
// another once an insert takes it: fed the same blocks, a cache with the reserve holds a
// chunk per shard more than one without, and the same entries.
TEST(BlockCacheTest, TheReserveKeepsOneChunkAheadInEveryShard) {
  const uint64_t chunk = 256 * 1024;  // of a 32 MiB cache
  BlockCache plain(32 * kMiB, nullptr), reserved(32 * kMiB, nullptr, /*reserve=*/true);
  const uint64_t ahead = BlockCache::kShards * chunk;
  plain.Insert(Key(0), Block(0).data(), false);
  reserved.Insert(Key(0), Block(0).data(), false);  // the reserve starts now
  EXPECT_EQ(AwaitBytes(reserved, plain.bytes() + ahead), plain.bytes() + ahead);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(reserved.bytes(), plain.bytes() + ahead);  // and no more
  // 4 MiB more (16 chunks' worth), spread over the shards: each takes its spare at least
  // once, and gets another.
  for (uint64_t i = 1; i <= 1024; i++) {
    plain.Insert(Key(i), Block(i).data(), false);
    reserved.Insert(Key(i), Block(i).data(), false);
  }
  EXPECT_EQ(AwaitBytes(reserved, plain.bytes() + ahead), plain.bytes() + ahead);
  EXPECT_EQ(reserved.Stats().entries, plain.Stats().entries);
  std::vector<uint8_t> out(4096);
  for (uint64_t i = 0; i <= 1024; i++) {
    ASSERT_TRUE(reserved.Lookup(Key(i), out.data(), 0, 4096)) << i;
    ASSERT_EQ(out, Block(i)) << i;
  }
}

// The reserve maps nothing past a shard's share, however small.
TEST(BlockCacheTest, TheReserveStaysWithinTheShares) {
  std::atomic<uint64_t> indirect{0};
  const uint64_t max = 32 * kMiB;
  BlockCache c(max, &indirect, /*reserve=*/true);
  const uint64_t fixed = c.bytes();
  // Room for 20 chunks of 256 KiB: four shards get two, the other twelve one.
  indirect = max - fixed - 20 * 256 * 1024;
  for (uint64_t i = 0; i < 2000; i++) c.Insert(Key(i), Block(i).data(), true);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LE(c.bytes() + indirect.load(), max);
  EXPECT_GE(c.Stats().entries, 16u * 64);  // every shard holds at least a chunk of blocks
}

// A chunk source for the reserve that holds every chunk back until Release().
class HeldChunkSource {
 public:
  BlockCache::ChunkSource Source() {
    return [this](uint64_t bytes) {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return released_; });
      return BlockCache::MapFaultedChunk(bytes);
    };
  }
  void Release() {
    {
      std::lock_guard l(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

// Declared after the cache: lets its reserve go before the cache joins it.
struct ReleaseOnExit {
  HeldChunkSource& held;
  ~ReleaseOnExit() { held.Release(); }
};

// A reader's miss waits for no page fault (block_cache.h, "Readers wait for no fault"):
// while the reserve owes a chunk, a reader's offer that only fresh memory could hold is
// left out, a commit's is not, and the reader's gets in once the reserve has delivered.
TEST(BlockCacheTest, AReadersOfferWaitsForTheReservesMemory) {
  HeldChunkSource held;
  BlockCache c(32 * kMiB, nullptr, /*reserve=*/true, held.Source());
  ReleaseOnExit release{held};
  const uint64_t fixed = c.bytes();
  std::vector<uint8_t> out(4096);
  const auto asked = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.Insert(Key(0), Block(0).data(), false, Offer::kRead));  // starts the reserve
  EXPECT_FALSE(c.Lookup(Key(0), out.data(), 0, 4096));
  EXPECT_EQ(c.Stats().unready, 1u);
  EXPECT_EQ(c.bytes(), fixed);  // nothing mapped
  EXPECT_TRUE(c.Insert(Key(1), Block(1).data(), true, Offer::kWritten));
  EXPECT_TRUE(c.Lookup(Key(1), out.data(), 0, 4096));
  // Another shard (the next region of the same group), still waiting: left out too, unless
  // this machine took longer than kReserveStall since the first offer.
  c.Insert(Key(16), Block(16).data(), false, Offer::kRead);  // 64 KiB regions
  const bool in_time = std::chrono::steady_clock::now() - asked < BlockCache::kReserveStall;
  if (in_time) {
    EXPECT_EQ(c.Stats().unready, 2u);
  }
  held.Release();
  // Key(1)'s chunk (and Key(16)'s, if this machine was too slow), and a spare per shard.
  const uint64_t chunk = 256 * 1024;  // of a 32 MiB cache
  const uint64_t ready = fixed + (in_time ? 1 : 2) * chunk + BlockCache::kShards * chunk;
  ASSERT_EQ(AwaitBytes(c, ready), ready);
  EXPECT_TRUE(c.Insert(Key(0), Block(0).data(), false, Offer::kRead));
  ASSERT_TRUE(c.Lookup(Key(0), out.data(), 0, 4096));
  EXPECT_EQ(out, Block(0));
}

// A reserve that delivers nothing for kReserveStall while it owes a chunk is taken to be
// starved (no idle CPU for it): readers then fault their memory in themselves.
TEST(BlockCacheTest, ReadersFaultTheirOwnMemoryInWhenTheReserveIsStarved) {
  HeldChunkSource held;
  BlockCache c(32 * kMiB, nullptr, /*reserve=*/true, held.Source());
  ReleaseOnExit release{held};
  std::vector<uint8_t> out(4096);
  c.Insert(Key(0), Block(0).data(), false, Offer::kRead);
  EXPECT_EQ(c.Stats().unready, 1u);
  std::this_thread::sleep_for(BlockCache::kReserveStall + std::chrono::milliseconds(10));
  c.Insert(Key(0), Block(0).data(), false, Offer::kRead);
  ASSERT_TRUE(c.Lookup(Key(0), out.data(), 0, 4096));
  EXPECT_EQ(out, Block(0));
  EXPECT_EQ(c.Stats().unready, 1u);
}

// A 32 MiB cache its commits filled twice over with 4 KiB blocks, its reserve held up (so a
// reader may not fault memory in), and its stats once full.
struct FullCacheWithHeldReserve {
  FullCacheWithHeldReserve() {
    for (uint64_t i = 0; i < 16384; i++) cache.Insert(Key(i), Block(i).data(), true);
    full = cache.Stats();
  }
  HeldChunkSource held;
  BlockCache cache{32 * kMiB, nullptr, /*reserve=*/true, held.Source()};
  ReleaseOnExit release{held};  // destroyed first: the reserve goes before the cache joins it
  BlockCacheStats full;
};

// In a full cache, a reader's popular block takes a victim's place (its buffer, already
// faulted in) while the reserve owes memory, and the victim's buffer is not lost.
TEST(BlockCacheTest, AReadersPopularBlockReplacesAVictimOfItsSize) {
  FullCacheWithHeldReserve f;
  BlockCache& c = f.cache;
  const BlockCacheStats& full = f.full;
  std::vector<uint8_t> out(4096);
  for (uint64_t k = 20000; k < 20100; k++) {
    for (int i = 0; i < 3; i++) ASSERT_FALSE(c.Lookup(Key(k), out.data(), 0, 4096));  // popular
    c.Insert(Key(k), Block(k).data(), false, Offer::kRead);
    ASSERT_TRUE(c.Lookup(Key(k), out.data(), 0, 4096)) << k;
    EXPECT_EQ(out, Block(k));
  }
  EXPECT_EQ(c.Stats().unready, 0u);
  EXPECT_EQ(c.Stats().entries, full.entries);
  EXPECT_EQ(c.bytes(), full.bytes);
}

// A popular block of another size in a full cache takes the memory of the sparsest chunk,
// emptied, as it is: no fresh chunk, so a reader's offer gets in even while the reserve
// owes memory (and a commit's faults nothing in).
TEST(BlockCacheTest, ABlockOfAnotherSizeReusesTheSparsestChunksMemory) {
  FullCacheWithHeldReserve f;
  BlockCache& c = f.cache;
  const BlockCacheStats& full = f.full;
  ASSERT_GT(full.rejected, 0u);
  const BlockKey big{0, 8192, Key(0).offset, 8};  // Key(0)'s shard
  std::vector<uint8_t> out(8192);
  for (int i = 0; i < 3; i++) ASSERT_FALSE(c.Lookup(big, out.data(), 0, 8192));  // popular
  c.Insert(big, Block(1, 8192).data(), false, Offer::kRead);
  ASSERT_TRUE(c.Lookup(big, out.data(), 0, 8192));
  EXPECT_EQ(out, Block(1, 8192));
  EXPECT_EQ(c.Stats().unready, 0u);
  EXPECT_EQ(c.bytes(), full.bytes);            // the same memory, nothing mapped or unmapped
  EXPECT_LT(c.Stats().entries, full.entries);  // the chunk's 4 KiB blocks went
}

// Blocks bigger than half a chunk are malloc'd, not carved from the reserve's chunks: a
// reader's offer of one never waits for the reserve.
TEST(BlockCacheTest, AReadersLargeBlockDoesNotWaitForTheReserve) {
  HeldChunkSource held;
  BlockCache c(32 * kMiB, nullptr, /*reserve=*/true, held.Source());  // chunks of 256 KiB
  ReleaseOnExit release{held};
  const uint32_t size = 256 * 1024;
  std::vector<uint8_t> out(size);
  c.Insert(Key(0, size), Block(0, size).data(), false, Offer::kRead);
  ASSERT_TRUE(c.Lookup(Key(0, size), out.data(), 0, size));
  EXPECT_EQ(out, Block(0, size));
  EXPECT_EQ(c.Stats().unready, 0u);
}

TEST(BlockCacheTest, ASequentialScanDoesNotWipeTheHotSet) {
  BlockCache c(2 * kMiB, nullptr);  // room for a few hundred 4 KiB blocks
  std::vector<uint8_t> out(4096);
  // A hot set, read three times.
  for (int round = 0; round < 3; round++) {
    for (uint64_t i = 0; i < 200; i++) {
      if (!c.Lookup(Key(i), out.data(), 0, 4096)) c.Insert(Key(i), Block(i).data(), false);
    }
  }
  // A scan of 4x the cache, each block once.
  uint64_t scan_inserted = c.Stats().inserted;
  for (uint64_t i = 1000; i < 1000 + 2000; i++) {
    if (!c.Lookup(Key(i), out.data(), 0, 4096)) c.Insert(Key(i), Block(i).data(), false);
  }
  scan_inserted = c.Stats().inserted - scan_inserted;
  int hits = 0;
  for (uint64_t i = 0; i < 200; i++) {
    if (c.Lookup(Key(i), out.data(), 0, 4096)) {
      hits++;
      EXPECT_EQ(out, Block(i));
    }
  }
  EXPECT_GE(hits, 190);
  // Most of the scan was refused at the door (no copy).
  EXPECT_LT(scan_inserted, 400u);
  EXPECT_GT(c.Stats().rejected, 1600u);
}

TEST(BlockCacheTest, AFrequentlyReadBlockGetsIntoAFullCache) {
  BlockCache c(kMiB, nullptr);
  std::vector<uint8_t> out(4096);
  for (uint64_t i = 0; i < 2000; i++) {  // fills the cache with blocks read once
    if (!c.Lookup(Key(i), out.data(), 0, 4096)) c.Insert(Key(i), Block(i).data(), false);
  }
  ASSERT_GT(c.Stats().rejected, 0u);
  const uint64_t popular = 5000;
  for (int k = 0; k < 4; k++) EXPECT_FALSE(c.Lookup(Key(popular), out.data(), 0, 4096));
  c.Insert(Key(popular), Block(popular).data(), false);
  ASSERT_TRUE(c.Lookup(Key(popular), out.data(), 0, 4096));
  EXPECT_EQ(out, Block(popular));
}

TEST(BlockCacheTest, AStreamsLookupsDoNotCountForAdmission) {
  BlockCache c(kMiB, nullptr);
  std::vector<uint8_t> out(4096);
  for (uint64_t i = 0; i < 2000; i++) {
    if (!c.Lookup(Key(i), out.data(), 0, 4096)) c.Insert(Key(i), Block(i).data(), false);
  }
  const uint64_t streamed = 5000;
  for (int k = 0; k < 4; k++) {
    EXPECT_FALSE(c.Lookup(Key(streamed), out.data(), 0, 4096, /*count_access=*/false));
  }
  c.Insert(Key(streamed), Block(streamed).data(), false);
  EXPECT_FALSE(c.Lookup(Key(streamed), out.data(), 0, 4096));
}

// A prefetch is a hint to the CPU: it is not an access (no hit, no miss, no count toward
// admission) and finds nothing by itself.
TEST(BlockCacheTest, APrefetchIsNoAccess) {
  BlockCache c(kMiB, nullptr);
  std::vector<uint8_t> out(4096);
  for (uint64_t i = 0; i < 2000; i++) {
    if (!c.Lookup(Key(i), out.data(), 0, 4096)) c.Insert(Key(i), Block(i).data(), false);
  }
  const BlockCacheStats before = c.Stats();
  const uint64_t prefetched = 5000;
  for (int k = 0; k < 8; k++) c.Prefetch(Key(prefetched));
  c.Prefetch(Key(3));
  const BlockCacheStats after = c.Stats();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses);
  c.Insert(Key(prefetched), Block(prefetched).data(), false);
  EXPECT_FALSE(c.Lookup(Key(prefetched), out.data(), 0, 4096));  // refused: never asked for
}

// When the indirect cache takes a little more of the bound, each shard gives back about one
// chunk (the sparsest), not most of its entries.
TEST(BlockCacheTest, AShrinkingShareCostsAboutAChunkOfEntries) {
  std::atomic<uint64_t> indirect{0};
  BlockCache c(16 * kMiB, &indirect);  // 1 MiB a shard, in chunks of 128 KiB (32 blocks)
  for (uint64_t i = 0; i < 8192; i++) c.Insert(Key(i), Block(i).data(), true);
  const uint64_t before = c.Stats().entries;
  ASSERT_GT(before, 3000u);
  indirect = 2 * kMiB;  // 128 KiB less a shard: each was at 7 chunks and must go to 6
  std::vector<uint8_t> out(4096);
  uint64_t hits = 0;
  for (uint64_t i = 0; i < 8192; i++) hits += c.Lookup(Key(i), out.data(), 0, 4096) ? 1 : 0;
  const uint64_t after = c.Stats().entries;
  EXPECT_LE(c.bytes(), 14 * kMiB);
  EXPECT_GE(after, before - BlockCache::kShards * 32);  // one chunk a shard
  EXPECT_GE(hits, after);
}

TEST(BlockCacheTest, ABlockBiggerThanTheCacheIsRefused) {
  BlockCache c(256 * 1024, nullptr);  // 16 KiB a shard
  auto b = Block(1, 131072);
  c.Insert(Key(1, 131072), b.data(), true);
  std::vector<uint8_t> out(131072);
  EXPECT_FALSE(c.Lookup(Key(1, 131072), out.data(), 0, 131072));
  EXPECT_LE(c.bytes(), 256u * 1024);
}

}  // namespace
}  // namespace volstack::pool
