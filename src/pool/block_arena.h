// BlockArena: the memory of one block-cache shard (block_cache.h), in chunks that each hold
// blocks of one size.
//
// Why not malloc. A cache hit is a 4-16 KiB copy out of memory touched at random; with one
// malloc'd buffer per block, every hit also misses the TLB (a 256 MiB cache is 64 K pages
// of 4 KiB). Chunks of 2 MiB in transparent huge pages need one TLB entry per 512 blocks of
// 4 KiB: RandRead4K went from 0.69-0.79 to 0.86-0.92 of raw pread when measured with a
// bump allocator in huge pages (docs/notes/memory.md). And the cache can charge what it really
// holds: whole chunks, not block sizes plus a guessed malloc overhead.
//
// Layout. Chunks are chunk_bytes long (a power of two), mapped on demand, aligned to their
// size (so a block's chunk is its address rounded down) and advised as huge pages when
// they are 2 MiB. A chunk serves one block size at a time: its free slots are handed out
// lowest first (resident ones before purged ones: Purge), then its never-used tail.
//
// Order. An allocation takes the lowest free slot of the lowest chunk with room (address-
// ordered first fit), so blocks allocated in order (a commit's run, the refill's disk
// order) lie side by side in ascending addresses, also in slots that overwrites freed. A
// sequential read then copies stretches of memory the CPU prefetches; with a stack of free
// slots the commit after an overwrite laid its blocks out in reverse, and sequential reads
// of them ran at 0.55 of raw pread against 0.81 in order (pool_bench SeqRead1M/6, medians
// of 5: docs/notes/read-path.md).
//
// A chunk whose last block is freed
// becomes the arena's one spare when it has none (still mapped, still charged), else it is
// unmapped (the block cache's reserve may also map one ahead of need: AddSpare); the next
// chunk needed, of any block size, is the spare. Overwrites empty chunks steadily (a
// commit forgets the blocks it frees while it caches their new versions), and on this
// class of VM a fresh huge page costs 2-4 ms to fault in: the host has taken the freed
// memory back (docs/notes/memory.md). ReleaseSpare gives it back when the shard
// must shrink, so a shard that switches block sizes (another volblocksize) still returns
// the old size's memory as its blocks age out. Blocks bigger than half a chunk are plain
// malloc'd buffers (a chunk would waste up to half of itself on them).
//
// Threads: none of its own; the shard's mutex guards every call.
#pragma once

#include <bit>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <vector>

namespace volstack::pool {

// `bytes` of zeroed memory aligned to `align` (a power of two), advised as huge pages when
// aligned to one; an empty span when none can be had. Unmap gives it back.
std::span<uint8_t> MapAligned(uint64_t bytes, uint64_t align);
void Unmap(std::span<uint8_t> memory);

class BlockArena {
 public:
  static constexpr uint64_t kHugePage = 2 << 20;

  // chunk_bytes: a power of two, at least 4 KiB.
  explicit BlockArena(uint64_t chunk_bytes);
  ~BlockArena();  // unmaps every chunk; blocks bigger than half a chunk must be freed first
  BlockArena(const BlockArena&) = delete;
  BlockArena& operator=(const BlockArena&) = delete;

  // A buffer of `size` bytes (> 0), or nullptr when no memory can be had. Chunk slots are
  // powers of two: a size in between (a compressed block, later) takes the next one up.
  uint8_t* Allocate(uint32_t size);
  void Free(uint8_t* block, uint32_t size);  // `size` as allocated

  // What Allocate(size) would add to mapped_bytes(): 0 when a chunk has a free slot or the
  // spare can serve.
  uint64_t GrowthFor(uint32_t size) const;
  // Whether blocks of `size` live in chunks (larger ones are malloc'd).
  bool InChunks(uint32_t size) const { return SlotSize(size) <= chunk_bytes_ / 2; }
  // Whether Allocate(size) would map a fresh chunk.
  bool NeedsNewChunk(uint32_t size) const { return InChunks(size) && GrowthFor(size) > 0; }
  // Unmaps the spare chunk, if any; returns the bytes given back.
  uint64_t ReleaseSpare();
  // Takes a chunk mapped ahead of need (MapAligned(chunk_bytes(), chunk_bytes()), its pages
  // already faulted in) as the spare, charged from now on: BlockCache's reserve. Requires
  // !has_spare().
  void AddSpare(std::span<uint8_t> chunk);
  bool has_spare() const { return !spare_.empty(); }
  // The address range of the chunk with the fewest blocks in use (the cheapest to empty),
  // or an empty span when no chunk is mapped.
  std::span<uint8_t> SparsestChunk() const;
  // Gives the pages of every free slot handed out before back to the kernel (MADV_DONTNEED;
  // the mapping stays, and a slot handed out again faults in anew): for owners whose live
  // blocks may end up spread thinly over chunks that no other block size can use.
  // Adjacent free slots go in one call. Returns the bytes given back.
  uint64_t Purge();
  // Chunks mapped (the spare too) plus malloc'd large blocks: what the shard really holds.
  uint64_t mapped_bytes() const { return mapped_bytes_; }
  // Of those, the free slots' bytes Purge() gave back (not resident until handed out again).
  uint64_t purged_bytes() const { return purged_bytes_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }

 private:
  struct Chunk {
    uint8_t* base = nullptr;
    uint32_t block_size = 0;
    uint32_t slots = 0;
    uint32_t never_used = 0;  // slots [never_used, slots) were never handed out
    // free_slots[0, purged) had their pages given back, in descending order (taken from the
    // back, lowest first); slots freed later sit above them, as a min-heap: resident slots
    // are handed out first, lowest first.
    std::vector<uint32_t> free_slots;
    uint32_t purged = 0;
    bool small_pages = false;  // advised out of huge pages by Purge
    uint32_t live() const { return never_used - static_cast<uint32_t>(free_slots.size()); }
    bool Full() const { return free_slots.empty() && never_used == slots; }
  };

  static uint32_t SlotSize(uint32_t size) { return std::bit_ceil(size); }
  Chunk* NewChunk(uint32_t size);  // the spare, else a fresh mapping; nullptr if none
  void RetireChunk(Chunk* chunk);  // emptied: becomes the spare, or is unmapped

  const uint64_t chunk_bytes_;
  uint64_t mapped_bytes_ = 0;
  uint64_t purged_bytes_ = 0;
  std::map<uintptr_t, std::unique_ptr<Chunk>> chunks_;  // by base address
  struct ByAddress {
    bool operator()(const Chunk* a, const Chunk* b) const {
      return std::less<>()(a->base, b->base);
    }
  };
  std::map<uint32_t, std::set<Chunk*, ByAddress>> not_full_;  // block size -> chunks with room
  std::span<uint8_t> spare_;                                  // an emptied chunk, still mapped
  bool spare_small_pages_ = false;                            // the spare was purged
};

}  // namespace volstack::pool
