// BlockArena (block_arena.h): blocks never overlap and keep their bytes while others come
// and go; a chunk serves one size; an emptied chunk is kept as the one spare and serves the
// next chunk of any size, the others are unmapped; mapped_bytes() and GrowthFor() say what
// the memory really is.
#include "pool/block_arena.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>

namespace volstack::pool {
namespace {

TEST(BlockArenaTest, ChunksFillUpAndGoWithTheirLastBlock) {
  BlockArena arena(BlockArena::kHugePage);
  EXPECT_EQ(arena.GrowthFor(4096), BlockArena::kHugePage);
  std::vector<uint8_t*> blocks;
  for (int i = 0; i < 512; i++) {
    blocks.push_back(arena.Allocate(4096));
    ASSERT_NE(blocks.back(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blocks.back()) % 4096, 0u);
  }
  EXPECT_EQ(arena.mapped_bytes(), BlockArena::kHugePage);  // 512 x 4 KiB: one chunk, full
  EXPECT_EQ(arena.GrowthFor(4096), BlockArena::kHugePage);
  EXPECT_EQ(arena.GrowthFor(16384), BlockArena::kHugePage);  // another size, another chunk
  blocks.push_back(arena.Allocate(4096));
  EXPECT_EQ(arena.mapped_bytes(), 2 * BlockArena::kHugePage);
  uint8_t* const lone = blocks.back();
  arena.Free(lone, 4096);
  blocks.pop_back();
  // The lone block's chunk is the spare: still mapped, and the next chunk of any size.
  EXPECT_EQ(arena.mapped_bytes(), 2 * BlockArena::kHugePage);
  EXPECT_EQ(arena.GrowthFor(16384), 0u);
  uint8_t* const other_size = arena.Allocate(16384);
  const auto chunk_of = [](const uint8_t* b) {
    return reinterpret_cast<uintptr_t>(b) & ~(BlockArena::kHugePage - 1);
  };
  EXPECT_EQ(chunk_of(other_size), chunk_of(lone));
  EXPECT_EQ(arena.mapped_bytes(), 2 * BlockArena::kHugePage);
  arena.Free(other_size, 16384);
  EXPECT_EQ(arena.ReleaseSpare(), BlockArena::kHugePage);
  EXPECT_EQ(arena.ReleaseSpare(), 0u);
  EXPECT_EQ(arena.mapped_bytes(), BlockArena::kHugePage);
  EXPECT_EQ(arena.GrowthFor(16384), BlockArena::kHugePage);
  arena.Free(blocks[7], 4096);
  EXPECT_EQ(arena.GrowthFor(4096), 0u);  // a free slot
  uint8_t* again = arena.Allocate(4096);
  EXPECT_EQ(again, blocks[7]);
  blocks[7] = again;
  for (uint8_t* b : blocks) arena.Free(b, 4096);
  EXPECT_EQ(arena.mapped_bytes(), BlockArena::kHugePage);  // the spare
  EXPECT_EQ(arena.ReleaseSpare(), BlockArena::kHugePage);
  EXPECT_EQ(arena.mapped_bytes(), 0u);
}

// Address-ordered first fit: slots freed in any order (in ascending order, as a commit frees
// an overwritten run, and then some out of order) are handed out lowest first, in the
// lowest chunk with room, so blocks allocated in order lie in ascending addresses.
TEST(BlockArenaTest, FreedSlotsAreHandedOutLowestFirst) {
  BlockArena arena(BlockArena::kHugePage);
  std::vector<uint8_t*> blocks;
  for (int i = 0; i < 256; i++) blocks.push_back(arena.Allocate(16384));  // two full chunks
  std::sort(blocks.begin(), blocks.end());
  std::vector<int> freed = {5, 6, 7, 100, 129, 130, 131, 200, 250, 3, 140, 1};
  for (int i : freed) arena.Free(blocks[i], 16384);
  std::vector<uint8_t*> again;
  for (size_t i = 0; i < freed.size(); i++) again.push_back(arena.Allocate(16384));
  std::sort(freed.begin(), freed.end());
  std::vector<uint8_t*> want;
  for (int i : freed) want.push_back(blocks[i]);
  EXPECT_EQ(again, want);
  for (uint8_t* b : blocks) arena.Free(b, 16384);
}

TEST(BlockArenaTest, OnlyOneEmptiedChunkStaysMapped) {
  BlockArena arena(64 * 1024);
  std::vector<uint8_t*> blocks;
  for (int i = 0; i < 3 * 16; i++) blocks.push_back(arena.Allocate(4096));  // three chunks
  EXPECT_EQ(arena.mapped_bytes(), 3 * 65536u);
  for (uint8_t* b : blocks) arena.Free(b, 4096);
  EXPECT_EQ(arena.mapped_bytes(), 65536u);
  EXPECT_EQ(arena.ReleaseSpare(), 65536u);
  EXPECT_EQ(arena.mapped_bytes(), 0u);
}

TEST(BlockArenaTest, MapAlignedGivesZeroedAlignedMemory) {
  for (const uint64_t align : {uint64_t{65536}, BlockArena::kHugePage}) {
    const uint64_t bytes = 3 * BlockArena::kHugePage + 4096;
    const std::span<uint8_t> m = MapAligned(bytes, align);
    ASSERT_EQ(m.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % align, 0u);
    for (uint64_t k = 0; k < bytes; k += 4096) ASSERT_EQ(m[k], 0) << k;
    EXPECT_EQ(m[bytes - 1], 0);
    std::memset(m.data(), 0xa5, bytes);  // all of it is ours
    EXPECT_EQ(m[bytes - 1], 0xa5);
    Unmap(m);
  }
}

TEST(BlockArenaTest, BlocksBiggerThanHalfAChunkAreAllocatedAlone) {
  BlockArena arena(64 * 1024);
  EXPECT_EQ(arena.GrowthFor(131072), 131072u);
  uint8_t* big = arena.Allocate(131072);
  ASSERT_NE(big, nullptr);
  uint8_t* half = arena.Allocate(32768);  // exactly half a chunk: two to a chunk
  EXPECT_EQ(arena.mapped_bytes(), 131072u + 65536u);
  arena.Free(big, 131072);
  arena.Free(half, 32768);
  arena.ReleaseSpare();  // the half block's chunk
  EXPECT_EQ(arena.mapped_bytes(), 0u);
}

// Against a model: random sizes allocated and freed in random order, with a purge now and
// then, each block filled with its own byte; every live block must still hold it, and all
// memory goes back.
TEST(BlockArenaTest, LiveBlocksNeverOverlap) {
  BlockArena arena(256 * 1024);
  std::mt19937_64 rng(7);
  // Powers of two, and sizes in between (compressed blocks, one day), small and large.
  const uint32_t sizes[] = {4096, 8192, 16384, 65536, 131072, 262144, 5000, 12288, 200000};
  std::map<uint8_t*, std::pair<uint32_t, uint8_t>> live;  // block -> size, fill byte
  for (int step = 0; step < 20000; step++) {
    if (step % 997 == 0) arena.Purge();
    if (live.size() < 300 && (live.empty() || rng() % 3 != 0)) {
      const uint32_t size = sizes[rng() % std::size(sizes)];
      uint8_t* b = arena.Allocate(size);
      ASSERT_NE(b, nullptr);
      const auto fill = static_cast<uint8_t>(rng());
      std::memset(b, fill, size);
      ASSERT_TRUE(live.emplace(b, std::make_pair(size, fill)).second);
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      const auto [size, fill] = it->second;
      for (uint32_t k = 0; k < size; k += 512) ASSERT_EQ(it->first[k], fill) << step;
      ASSERT_EQ(it->first[size - 1], fill) << step;
      arena.Free(it->first, size);
      live.erase(it);
    }
  }
  for (auto& [b, sf] : live) {
    for (uint32_t k = 0; k < sf.first; k += 512) ASSERT_EQ(b[k], sf.second);
    arena.Free(b, sf.first);
  }
  arena.ReleaseSpare();
  EXPECT_EQ(arena.mapped_bytes(), 0u);
}

// The VmFlags line of the mapping that holds `p`, from /proc/self/smaps.
std::string VmFlagsOf(const uint8_t* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t start, end;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &start, &end) == 2) {
      inside = start <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line + " ";
    }
  }
  return "";
}

// Whether the page at `p` is resident (mincore).
bool Resident(const uint8_t* p) {
  unsigned char v = 0;
  const auto page = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(page), 4096, &v), 0);
  return (v & 1) != 0;
}

TEST(BlockArenaTest, PurgeGivesFreeSlotsPagesBackAndHandsResidentSlotsOutFirst) {
  BlockArena arena(BlockArena::kHugePage);
  std::vector<uint8_t*> blocks;
  for (int i = 0; i < 512; i++) {
    blocks.push_back(arena.Allocate(4096));
    std::memset(blocks.back(), 0x5A, 4096);
  }
  // Every 64th block stays: the chunk cannot go, and 504 of its slots are free.
  for (int i = 0; i < 512; i++) {
    if (i % 64 != 0) arena.Free(blocks[i], 4096);
  }
  EXPECT_TRUE(Resident(blocks[1]));
  EXPECT_EQ(arena.Purge(), 504u * 4096);
  EXPECT_EQ(arena.purged_bytes(), 504u * 4096);
  EXPECT_EQ(arena.Purge(), 0u);  // nothing freed since
  EXPECT_FALSE(Resident(blocks[1]));
  EXPECT_FALSE(Resident(blocks[511]));
  // Out of huge pages, or khugepaged would make the holes resident again.
  EXPECT_NE(VmFlagsOf(blocks[0]).find(" nh "), std::string::npos) << VmFlagsOf(blocks[0]);
  for (int i = 0; i < 512; i += 64) {
    EXPECT_TRUE(Resident(blocks[i]));
    EXPECT_EQ(blocks[i][4095], 0x5A);  // live blocks keep their bytes
  }
  // A block freed after the purge is resident, and handed out before the purged ones.
  arena.Free(blocks[64], 4096);
  EXPECT_EQ(arena.Allocate(4096), blocks[64]);
  EXPECT_EQ(arena.purged_bytes(), 504u * 4096);
  // A purged slot handed out again (the lowest) is counted as resident again.
  uint8_t* again = arena.Allocate(4096);
  EXPECT_EQ(again, blocks[1]);
  EXPECT_EQ(arena.purged_bytes(), 503u * 4096);
  std::memset(again, 1, 4096);
  // The chunk emptied: it goes, and so does what it had purged.
  for (int i = 0; i < 512; i += 64) arena.Free(blocks[i], 4096);
  arena.Free(again, 4096);
  EXPECT_EQ(arena.purged_bytes(), 0u);
  EXPECT_EQ(arena.mapped_bytes(), BlockArena::kHugePage);  // the spare
  // Reused whole, the spare is advised as a huge page again.
  uint8_t* reused = arena.Allocate(16384);
  EXPECT_EQ(reused, blocks[0]);
  EXPECT_NE(VmFlagsOf(reused).find(" hg "), std::string::npos) << VmFlagsOf(reused);
  arena.Free(reused, 16384);
}

}  // namespace
}  // namespace volstack::pool
