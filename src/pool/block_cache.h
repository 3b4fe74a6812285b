// BlockCache: the pool's cache of verified block contents (ZFS's ARC, in its role of keeping
// data a read would otherwise fetch and verify again).
//
// Key. A block is named by where it lives and when it was born: (vdev, offset, size, birth
// txg). Copy-on-write never rewrites a live block in place, and the allocator reuses space
// only in a later txg than the one that freed it, so within one open pool a key names one
// content forever: no entry is ever invalidated, a freed block's entry simply stops being
// asked for and ages out. (Txg numbers only grow while a pool is open; an import starts
// with an empty cache, so a rewind to an older uberblock cannot alias either.)
//
// What goes in. Only bytes that are known good: blocks whose checksum was verified by a
// read, and blocks a txg commit wrote (the commit computed their checksum from those very
// bytes). A hit therefore skips both the vdev read and the checksum. A large commit copies
// its blocks on a thread of its own that no commit waits for (cache_fill.h): what it did
// not get to is read back from the vdev, verified, by another (cache_refill.h).
//
// Memory ahead of need. On this class of VM memory the kernel has not handed out lately
// is slow to touch: a fresh 2 MiB huge page costs 2-4 ms to fault in (the host took it
// back), so a cache growing to 256 MiB spends over half a second of CPU in page faults,
// inside the copies of commits and reads, under the shard's lock (docs/notes/memory.md). With
// `reserve`, the first Insert starts a thread at idle priority that keeps one chunk per shard
// mapped and faulted in ahead of need, as a spare (BlockArena::AddSpare) charged to the bound like
// any chunk; an Insert that takes a spare wakes it to fault the next. It maps nothing past a
// shard's share and sleeps when every shard has its spare or is full. The copies then rarely touch
// fresh memory, and while a cache grows two threads fault it in rather than one. One chunk ahead
// did as well as faulting the whole share in at once (pool_bench SeqRead1M/0, the share of reads
// that hit the blocks the commits cached: medians of 7, 96 % with one chunk ahead, 95 % with the
// whole share, 90 % without), and holds at most a chunk per shard that nothing uses. A pool that
// only lists its datasets never inserts, and so never reserves.
//
// Readers wait for no fault. A read's miss is offered as Offer::kRead: it goes into a free
// slot or the spare (or, if admitted, a victim's place), and when the shard would need a
// fresh chunk it is left out (counted as `unready`) and the reserve is woken; the block is
// read from its vdev again when next asked for. A fault under the shard's lock cost that
// read 2-4 ms and stalled every other reader of the shard; the reserve faults on a CPU
// readers do not use. Right after a large write, when the commits' copies had not got to
// every block and the cache was still growing, the first random reads of pool_bench's
// RandRead4K/0 read at 0.26-0.70 of raw with the faults in the reads. A reserve that makes
// no progress for kReserveStall while asked (a machine with no idle CPU for an idle-priority
// thread) is taken to be starved, and readers fault memory in themselves, as without one.
//
// Bound. The cache shares the pool's `cache` bound (PoolTuning::cache_max_bytes) with the
// indirect-block cache, which has priority: this cache holds at most max - indirect bytes
// and shrinks when the indirect cache grows. Block copies live in each shard's BlockArena
// (chunks of one block size, huge pages for a large cache: block_arena.h), and a shard is
// charged the chunks it has mapped, free slots included; the fixed slot tables, frequency
// sketches and hints are charged too, so bytes() is what the cache really costs. A shard
// over its share gives back its sparsest chunk (evicting the blocks in it), so a shrinking
// share costs about as many entries as the memory it gives back.
//
// Replacement: CLOCK (a reference bit per entry, the usual approximation of LRU) with
// TinyLFU admission (Einziger et al., "TinyLFU: A Highly Efficient Cache Admission
// Policy"). Every lookup and insertion is counted in a small count-min sketch of 4-bit
// counters, halved every 10 x capacity events so old popularity fades; a key's counters
// share one cache line (a blocked sketch), so a count costs one miss. While there is room
// every candidate is admitted; once full, a candidate replaces CLOCK's victim only if it
// was asked for more often. So:
//   - a sequential scan larger than the cache (each block seen once) is refused at the door:
//     it does not wipe the cache, and a refused block costs no copy, only the miss itself;
//   - a loop over slightly more than the cache keeps what it has (an LRU would hit nothing);
//   - a block asked for repeatedly gets in over blocks that are not.
//
// Hints: where a block was last found, so its copy can start before its lookup ends. A
// 4 KiB read that hits chains three dependent loads, each a cache miss when the reads are
// random over more memory than the CPU's caches: the block pointer (in the volume's
// indirect block), the cache's slot (whose key comes from that pointer), then the block's
// bytes (whose address is in the slot). A reader may name a block by its own address for
// it (a volume's block number) in Lookup; a named hit records the address of the bytes in
// a table indexed by the name, and PrefetchNamed, called first thing in a read, starts
// loading the bytes at the recorded address while the pointer and the slot are still on
// their way. A hint is only ever prefetched, never read through: a stale one (the entry
// evicted, its memory reused or unmapped, another name sharing the table entry) costs a
// wasted prefetch, which cannot fault, and nothing else. The slot's address is recorded
// and prefetched too (it moves only when a deletion shifts it back). pool_bench HitRead4K
// (4 KiB random reads of 192 MiB, all cached): 1,053 ns a hit without hints, 790 ns with
// them, the bytes' address doing most of that (docs/notes/read-path.md). Both
// addresses fit one word (PackHint), 8 bytes an entry: at 16 bytes, loading the hint took
// most of Volume::Read's own time in perf, and at 8 the table holds as many names in half
// the memory (HitRead4K 615 -> 563 ns a hit). As many entries as the
// slot tables have room for, one per 4 KiB of the bound rounded up to a power of two (512
// KiB at the default 256 MiB), charged with the tables. The volume prefetches the block's
// pointer the same way (Volume::PrefetchPointer).
//
// Threads: all methods are thread-safe. The cache is split into kShards shards, each with
// its own mutex, slot table, sketch and 1/kShards of the capacity; block bytes are copied
// under the shard lock (one block: microseconds, or for a commit's copy a fresh chunk's
// page faults).
//
// Shards. A block's shard is chosen by the 512 KiB region of its vdev it lies in, not by
// its whole key: the blocks of a run (a commit writes runs, a stream reads them) then go to
// one shard in order, and so sit side by side in a chunk or two of its arena, in ascending
// order (block_arena.h, "Order"), where a sequential read copies them as stretches of
// memory the CPU prefetches (SeqRead1M/0: 0.55-0.64 of raw with shards by key hash,
// 0.79-0.80 by 256 KiB region, medians of three runs: docs/notes/read-path.md).
// Each jump to another shard's memory costs the copies what the prefetcher must learn
// again: with every block cached, 0.944 of raw by 512 KiB region against 0.895 by 256 KiB.
// Longer regions spread a volume less evenly (below): by 1 MiB region the random reads of
// pool_bench RandRead4K/0 hit 91.6 % against 93.1 % (docs/notes/read-path.md). A region is
// 512 KiB, or 1/32 of a shard's share if that is less (down to 4 KiB, a block each), so a
// few regions can never hold more than a small part of a shard.
// Each aligned group of kShards regions is dealt out over all the shards in an order hashed
// from the group, so data laid out contiguously (what a commit writes) spreads exactly
// evenly while a stride of whole groups still lands at random: with shards by a hash of the
// region, the fullest of 16 shards got about a fifth more than its share and began evicting
// while others sat part empty. The shares themselves are whole chunks (ShareOf): a shard
// cannot use part of one. A cache offered exactly its capacity in contiguous blocks keeps
// 97.6 % of them (89 % with hashed regions and equal shares rounded down to chunks;
// block_cache_test.cc).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stop_token>
#include <thread>
#include <vector>

namespace volstack::pool {

struct BlockKey {
  uint32_t vdev = 0;
  uint32_t size = 0;    // bytes (the block's logical size: what the cache holds)
  uint64_t offset = 0;  // byte offset on the vdev
  uint64_t birth = 0;   // txg the block was written in
  bool operator==(const BlockKey&) const = default;
};

struct BlockCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserted = 0;  // admitted (including writes at commit)
  uint64_t rejected = 0;  // refused by admission (no room for something this rarely used),
                          // or a key or memory a slot cannot hold (block_cache.cc, Slot)
  uint64_t unready = 0;   // a kRead offer (a reader's, the refill's) left out: only fresh
                          // memory could have held it
  uint64_t evicted = 0;   // for room, or forgotten (freed by a commit)
  uint64_t entries = 0;
  uint64_t bytes = 0;  // charged bytes, sketch included
};

// Who offers a block to Insert, which decides whether the insert may fault fresh memory in
// (see "Readers wait for no fault" above).
enum class Offer {
  kWritten,  // a commit's copy: may
  kRead,     // a read's miss (or the refill's block): only while the reserve is not
             // running or is starved
};

class BlockCache {
 public:
  static constexpr size_t kShards = 16;
  // How long the reserve may leave a request for memory unanswered before readers take it
  // to be starved: a 2 MiB chunk faults in within 2-6 ms when the thread runs.
  static constexpr std::chrono::milliseconds kReserveStall{20};
  // Maps a chunk of `bytes` (aligned to its size) and faults it in; an empty span when no
  // memory can be had. The reserve's source of chunks; tests pass one they can hold up.
  using ChunkSource = std::function<std::span<uint8_t>(uint64_t bytes)>;
  static std::span<uint8_t> MapFaultedChunk(uint64_t bytes);

  // The cache holds at most max_bytes - *other_bytes (the indirect cache), read live.
  // `other_bytes` must outlive the cache; nullptr means no other user of the bound. With
  // `reserve`, the first Insert starts the reserve (see above).
  BlockCache(uint64_t max_bytes, const std::atomic<uint64_t>* other_bytes, bool reserve = false,
             ChunkSource chunk_source = MapFaultedChunk);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;
  // false when its tables could not be mapped (a limit on the process's memory): nothing
  // else may then be called, and the owner goes without a cache.
  bool usable() const { return !shards_.empty(); }

  // Keys: a key whose offset or size is not in 512-byte sectors, whose offset is past 8 PiB
  // or whose vdev is past 65,535 is never cached (a slot packs its key: block_cache.cc).
  //
  // On a hit copies bytes [in_off, in_off + n) of the block to dst and returns true. Hit or
  // miss, the access is counted for admission unless `count_access` is false (a stream,
  // which admits nothing: counting it would only cost the sketch's writes and age the
  // counts of blocks asked for by others).
  // A hit with a `name` other than kUnnamed records where the block was found, for
  // PrefetchNamed (see "Hints" above).
  static constexpr uint64_t kUnnamed = ~uint64_t{0};
  bool Lookup(const BlockKey& key, uint8_t* dst, uint32_t in_off, uint32_t n,
              bool count_access = true, uint64_t name = kUnnamed);
  // Where the bytes of the block named `name` were last found, or nullptr (tests: the
  // memory may have been freed or unmapped since, so only a test that knows the block is
  // still cached may read it).
  const uint8_t* HintedBytes(uint64_t name) const {
    return reinterpret_cast<const uint8_t*>(HintedData(LoadHint(name)));
  }
  // Starts loading byte `in_off` of where the block named `name` was last found, if it
  // was, and its slot, and returns at once. Takes no lock and trusts nothing: see "Hints".
  void PrefetchNamed(uint64_t name, uint32_t in_off) const {
    const uint64_t hint = LoadHint(name);
    if (hint == 0) return;
    // Addresses as numbers: no pointer arithmetic on memory that may be gone.
    __builtin_prefetch(reinterpret_cast<const void*>(HintedData(hint) + in_off));
    if (const std::optional<uint64_t> slot = HintedSlot(hint)) {
      __builtin_prefetch(reinterpret_cast<const void*>(slots_at_ + *slot * slot_bytes_));
    }
  }

  // A hint packs where a named block was last found in one word, so the table costs 8
  // bytes an entry and more of it stays in the CPU's caches. Above kHintSlotBits: the
  // bytes' address >> kHintDataShift (blocks are 16-byte aligned at least: malloc's
  // alignment, or their size in an arena chunk; user addresses fit 48 bits). Below: the
  // slot's index among all shards' slots + 1, or 0 for none (a bound over 2 GiB has more
  // slots than the field holds: those past it are not hinted). 0 as a whole: no hint.
  static constexpr int kHintDataShift = 4;
  static constexpr int kHintSlotBits = 20;
  static constexpr uint64_t kHintSlotMask = (uint64_t{1} << kHintSlotBits) - 1;
  static_assert(48 - kHintDataShift + kHintSlotBits <= 64);
  // 0 when the address does not fit the field (no hint).
  static constexpr uint64_t PackHint(uintptr_t data, uint64_t slot_index) {
    if (data % (uintptr_t{1} << kHintDataShift) != 0 || data >> 48 != 0) return 0;
    const uint64_t slot = slot_index < kHintSlotMask ? slot_index + 1 : 0;
    return (data >> kHintDataShift) << kHintSlotBits | slot;
  }
  static constexpr uintptr_t HintedData(uint64_t hint) {
    return (hint >> kHintSlotBits) << kHintDataShift;
  }
  static constexpr std::optional<uint64_t> HintedSlot(uint64_t hint) {
    const uint64_t slot = hint & kHintSlotMask;
    if (slot == 0) return std::nullopt;
    return slot - 1;
  }
  // Starts loading what a Lookup of `key` touches first, its table slot (and, for a
  // counted access, its sketch counters), and returns at once. A reader that knows which
  // blocks it will look up next calls it a few blocks ahead: the slot is a random access
  // into tables of megabytes, a cache and TLB miss that made each lookup cost a fifth as
  // much as its block's 16 KiB copy (perf, SeqRead1M/0). Takes no lock: it reads nothing,
  // only warms the CPU's cache (the tables never move once built).
  void Prefetch(const BlockKey& key, bool count_access = true) const;
  // Offers a verified copy of the whole block (key.size bytes). `count_access`: this call
  // is itself an access (a write at commit, the refill's first offer of a block); false
  // after a Lookup miss already counted it, or when offering the block again. Returns
  // false only when the block was left out for want of memory faulted in ahead (a kRead
  // offer while the reserve runs): offered again later it may well go in.
  bool Insert(const BlockKey& key, const uint8_t* data, bool count_access,
              Offer offer = Offer::kWritten);
  // Drops the block's entry, if any: a commit freed the block, so no one will ask for it
  // again, and its room goes to blocks that are live (admission would otherwise keep the
  // dead copies of overwritten blocks and refuse their new versions).
  void Forget(const BlockKey& key);
  // Drops every entry (tests; close). The frequency history is kept.
  void Clear();

  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t capacity() const;
  BlockCacheStats Stats() const;

 private:
  struct Shard;
  // Blocks within one 2^region_shift_-byte region of a vdev share a shard (theory above).
  size_t ShardIndex(const BlockKey& key) const;
  Shard& ShardFor(const BlockKey& key) { return *shards_[ShardIndex(key)]; }
  // The bytes shard `shard` may hold: its part of capacity(), in whole arena chunks.
  uint64_t ShareOf(size_t shard) const;
  // Sheds the shard's memory down to `cap` (its share of capacity()); s.mu held.
  void ShrinkLocked(Shard& s, uint64_t cap);

  const uint64_t max_bytes_;
  const std::atomic<uint64_t>* const other_bytes_;
  int region_shift_ = 12;
  int chunk_shift_ = 12;      // log2 of every shard arena's chunk size
  uint64_t fixed_bytes_ = 0;  // sketches, slot tables and hints
  std::atomic<uint64_t> bytes_{0};
  std::span<uint8_t> tables_;  // every shard's slot table and sketch, the hints, in huge pages
  // Where a named block was last found (PackHint): its bytes, and its slot (which may move
  // since: deletions shift slots back).
  uint64_t LoadHint(uint64_t name) const {
    return hints_[name & hint_mask_].load(std::memory_order_relaxed);
  }
  // Records that the block named `name` was found at `data`, in `slot`; the shard's lock
  // held.
  void NoteHint(uint64_t name, const uint8_t* data, const void* slot);
  std::atomic<uint64_t>* hints_ = nullptr;  // in tables_, hint_mask_ + 1 of them
  uint64_t hint_mask_ = 0;
  uintptr_t slots_at_ = 0;  // the first shard's first slot
  size_t slot_bytes_ = 0;   // sizeof(Shard::Slot), which this header cannot name
  std::vector<std::unique_ptr<Shard>> shards_;
  // The reserve: faults each shard's share in, as spare chunks, ahead of need.
  void Reserve(std::stop_token stop);
  void WakeReserve();
  // A reader may fault memory in itself: no reserve runs, or it is starved.
  bool ReaderMayFault() const;
  const bool reserve_;
  const ChunkSource chunk_source_;
  std::once_flag reserve_started_;
  std::atomic<bool> reserving_{false};  // the reserve's thread runs
  // steady_clock nanoseconds since the reserve was first asked for memory it has not
  // delivered yet; 0 when it owes none.
  std::atomic<int64_t> owed_since_{0};
  std::mutex reserve_mu_;
  std::condition_variable_any reserve_cv_;
  bool reserve_wanted_ = false;  // GUARDED_BY(reserve_mu_): a spare was taken
  std::jthread reserve_thread_;  // stopped and joined first thing in ~BlockCache
};

}  // namespace volstack::pool
