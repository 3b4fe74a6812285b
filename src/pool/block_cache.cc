#include "pool/block_cache.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <system_error>

#include "pool/block_arena.h"
#include "util/check.h"

namespace volstack::pool {

namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

uint64_t HashKey(const BlockKey& k) {
  return Mix(k.offset ^ Mix(k.birth ^ ((uint64_t{k.vdev} << 32) | k.size)));
}

struct KeyHash {
  size_t operator()(const BlockKey& k) const { return static_cast<size_t>(HashKey(k) >> 4); }
};

constexpr int kRows = 4;
constexpr uint8_t kMaxCount = 15;  // 4-bit counters, as TinyLFU
constexpr uint64_t kSeeds[kRows] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full,
                                    0x165667B19E3779F9ull, 0xD6E8FEB86659FD93ull};
constexpr uint64_t kBlockSeed = 0x27D4EB2F165667C5ull;
// A key's counters all lie in one block of this many (one cache line): a row of 16 each.
constexpr size_t kSketchBlock = 64;
constexpr size_t kRowCounters = kSketchBlock / kRows;
constexpr int kRowShift = 64 - std::countr_zero(kRowCounters);  // a row's counter: top bits

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// One shard: an open-addressing table (linear probing, backward-shift deletion) whose slots
// hold the key and the block's buffer, so a hit costs one probe and the copy: no list to
// relink, no node to chase (on this class of VM each dependent cache miss costs as much as
// copying a kilobyte). Eviction is CLOCK over the table (a slot's `ref` bit is set by a hit
// and cleared as the hand passes), an approximation of LRU that needs no writes on a hit
// beyond the slot it already touched.
//
// A slot packs its key, its block's address and the reference bit in three words: 24
// bytes, not the 40 of a BlockKey, a pointer and a flag. At the default bound the tables'
// 131,072 slots then take 3 MiB, not 5, and the 2 MiB hold 512 more blocks of 4 KiB (the
// tables are charged to the bound: theory in block_cache.h). A key the words cannot hold
// (an offset or size not in 512-byte sectors, an offset past 8 PiB, a vdev past 65,535) is
// never cached: its lookups miss and its inserts are refused.
struct BlockCache::Shard {
  struct Slot {
    // The key in the form a slot holds; `fits` false: the key cannot be held.
    struct Packed {
      uint64_t where = 0, birth = 0, vdev = 0;
      bool fits = false;
    };
    static constexpr int kSizeBits = 20;  // sectors: blocks below 512 MiB
    static constexpr int kVdevShift = 48;
    static constexpr uint64_t kRefBit = 1;
    static constexpr uint64_t kAddressMask = ((uint64_t{1} << kVdevShift) - 1) & ~kRefBit;
    static Packed Pack(const BlockKey& k) {
      Packed p;
      const uint64_t sectors = k.offset >> 9, size = k.size >> 9;
      p.fits = k.offset % 512 == 0 && k.size % 512 == 0 && size >> kSizeBits == 0 &&
               sectors >> (64 - kSizeBits) == 0 && k.vdev >> (64 - kVdevShift) == 0;
      p.where = sectors << kSizeBits | size;
      p.birth = k.birth;
      p.vdev = uint64_t{k.vdev} << kVdevShift;
      return p;
    }
    // Whether `data` can be held (a user-space address, at least 2-byte aligned).
    static bool Holdable(const uint8_t* data) {
      return (reinterpret_cast<uintptr_t>(data) & ~kAddressMask) == 0;
    }

    // First: a probe reads it before the rest, and a slot that straddles two lines has its
    // first word on the line prefetched.
    uint64_t held = 0;   // vdev << kVdevShift | the bytes' address | kRefBit; 0: empty
    uint64_t where = 0;  // offset / 512 << kSizeBits | size / 512
    uint64_t birth = 0;

    bool empty() const { return held == 0; }
    bool Holds(const Packed& p) const {
      return where == p.where && birth == p.birth && held >> kVdevShift << kVdevShift == p.vdev;
    }
    uint8_t* data() const { return reinterpret_cast<uint8_t*>(held & kAddressMask); }
    uint32_t size() const {
      return static_cast<uint32_t>(where & ((uint64_t{1} << kSizeBits) - 1)) << 9;
    }
    BlockKey key() const {
      return BlockKey{static_cast<uint32_t>(held >> kVdevShift), size(), (where >> kSizeBits) << 9,
                      birth};
    }
    bool ref() const { return held & kRefBit; }
    void set_ref(bool on) { held = on ? held | kRefBit : held & ~kRefBit; }
    void Fill(const Packed& p, uint8_t* data) {
      where = p.where;
      birth = p.birth;
      held = p.vdev | reinterpret_cast<uintptr_t>(data);
    }
    void Clear() { held = 0; }
  };
  static_assert(sizeof(Slot) == 24);

  std::mutex mu;
  std::span<Slot> table;  // GUARDED_BY(mu); power-of-two size, at most half full (tables_)
  size_t mask = 0;
  size_t entries = 0;         // GUARDED_BY(mu)
  size_t hand = 0;            // GUARDED_BY(mu): CLOCK hand
  BlockArena arena;           // GUARDED_BY(mu): the entries' memory; what the shard is charged
  uint32_t shift = 0;         // 64 - log2(sketch blocks)
  std::span<uint8_t> sketch;  // blocks of kSketchBlock counters (tables_), line-aligned
  uint64_t samples = 0, sample_limit = 0;
  BlockCacheStats stats;  // GUARDED_BY(mu): counts only

  Shard(std::span<Slot> slots, std::span<uint8_t> counters, uint64_t window, uint64_t chunk_bytes)
      : table(slots), arena(chunk_bytes), sketch(counters) {
    mask = slots.size() - 1;
    VS_CHECK(counters.size() % kSketchBlock == 0 &&
             reinterpret_cast<uintptr_t>(counters.data()) % kSketchBlock == 0);
    shift = static_cast<uint32_t>(64 - std::countr_zero(counters.size() / kSketchBlock));
    sample_limit = window;
  }

  size_t Slot0(uint64_t h) const { return static_cast<size_t>(h >> 20) & mask; }
  // The slot holding the key, or the empty slot where it would go.
  size_t Find(const Slot::Packed& key, uint64_t h) const {
    size_t i = Slot0(h);
    while (!table[i].empty() && !table[i].Holds(key)) i = (i + 1) & mask;
    return i;
  }
  uint64_t bytes() const { return arena.mapped_bytes(); }
  // Empties slot i, shifting later members of its probe run back (no tombstones).
  void Erase(size_t i, bool free_data) {
    if (free_data) arena.Free(table[i].data(), table[i].size());
    table[i].Clear();
    for (size_t j = (i + 1) & mask; !table[j].empty(); j = (j + 1) & mask) {
      const size_t home = Slot0(HashKey(table[j].key()));
      // Move j back into the hole at i unless its home lies cyclically in (i, j].
      const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (stays) continue;
      table[i] = table[j];
      table[j].Clear();
      i = j;
    }
  }
  // Returns the bytes the shard gave back (a chunk, if this was its last block and the
  // arena already had a spare).
  uint64_t Remove(size_t i, bool free_data = true) {
    const uint64_t before = bytes();
    Erase(i, free_data);
    entries--;
    stats.evicted++;
    return before - bytes();
  }
  // Gives memory back: the arena's spare chunk if it has one, else its sparsest chunk,
  // emptied (evicting the blocks in it) and unmapped, or when no chunk is mapped CLOCK's
  // victim (a large block). Evicting by CLOCK alone would rarely empty a whole chunk: its
  // blocks are spread over the table, so a shard asked for one chunk back could lose most
  // of its entries first. Returns the bytes given back (0: nothing left to evict).
  uint64_t Shed() {
    const uint64_t before = bytes();
    if (arena.ReleaseSpare() > 0 || entries == 0) return before - bytes();
    if (!EmptySparsestChunk()) return Remove(Victim());
    arena.ReleaseSpare();  // the chunk just emptied
    return before - bytes();
  }
  // Evicts every block of the sparsest chunk, which becomes the arena's spare (the arena
  // must have none): memory already faulted in, for a block size that has no room. Returns
  // false when no chunk is mapped.
  bool EmptySparsestChunk() {
    const std::span<uint8_t> chunk = arena.SparsestChunk();
    if (chunk.empty()) return false;
    const auto begin = reinterpret_cast<uintptr_t>(chunk.data());
    for (size_t i = 0; i < table.size();) {
      // Erase shifts a later entry into slot i: look at it again before moving on.
      const auto at = reinterpret_cast<uintptr_t>(table[i].data());
      if (!table[i].empty() && at - begin < chunk.size()) {
        Remove(i);
      } else {
        i++;
      }
    }
    return true;
  }
  // CLOCK: the next slot whose ref bit is clear (clearing the bits it passes). Requires
  // entries > 0.
  size_t Victim() {
    for (;;) {
      Slot& s = table[hand];
      if (!s.empty()) {
        if (!s.ref()) return hand;
        s.set_ref(false);
      }
      hand = (hand + 1) & mask;
    }
  }

  // Blocked, as Caffeine's sketch is: row r of a key's counters is one of 16 in the r-th
  // quarter of its block. Counting an access then dirties one cache line, not kRows at
  // random: on this class of VM the four lines cost a cached 4 KiB read a sixth of its time
  // (pool_bench RandRead4K/5 0.63 -> 0.76 of raw without counting, 0.71 blocked;
  // docs/notes/read-path.md).
  size_t SketchBlock(uint64_t h) const {
    return static_cast<size_t>((h * kBlockSeed) >> shift) * kSketchBlock;
  }
  size_t SketchSlot(uint64_t h, int r) const {
    return SketchBlock(h) + r * kRowCounters + static_cast<size_t>((h * kSeeds[r]) >> kRowShift);
  }
  uint8_t Freq(uint64_t h) const {
    uint8_t f = kMaxCount;
    for (int r = 0; r < kRows; r++) f = std::min(f, sketch[SketchSlot(h, r)]);
    return f;
  }
  // Conservative update: only the counters at the minimum grow.
  void Record(uint64_t h) {
    const uint8_t f = Freq(h);
    if (f < kMaxCount) {
      for (int r = 0; r < kRows; r++) {
        uint8_t& c = sketch[SketchSlot(h, r)];
        if (c == f) c++;
      }
    }
    if (++samples >= sample_limit) {
      for (auto& c : sketch) c >>= 1;
      samples /= 2;
    }
  }
};

size_t BlockCache::ShardIndex(const BlockKey& key) const {
  // Within each aligned group of kShards regions the shards are a permutation (XOR with one
  // hashed value per group), so data laid out contiguously spreads exactly evenly, while a
  // stride of whole groups still lands on shards at random.
  const uint64_t region = (key.offset >> region_shift_) ^ (uint64_t{key.vdev} << 48);
  return static_cast<size_t>((region ^ Mix(region / kShards)) & (kShards - 1));
}

std::span<uint8_t> BlockCache::MapFaultedChunk(uint64_t bytes) {
  const std::span<uint8_t> memory = MapAligned(bytes, bytes);
  for (uint64_t at = 0; at < memory.size(); at += 4096) memory[at] = 0;  // the faults
  return memory;
}

BlockCache::BlockCache(uint64_t max_bytes, const std::atomic<uint64_t>* other_bytes, bool reserve,
                       ChunkSource chunk_source)
    : max_bytes_(max_bytes),
      other_bytes_(other_bytes),
      reserve_(reserve),
      chunk_source_(std::move(chunk_source)) {
  // Per shard: room for `entries` blocks of 4 KiB (data blocks are no smaller); a table of
  // twice as many slots (at most half full); a sketch 4 counters wide per entry (few
  // collisions) whose counts are halved every 10 x entries accesses; memory in chunks of
  // an eighth of the shard's share, up to a huge page (a chunk is the unit it is charged).
  const uint64_t entries = std::bit_ceil(std::max<uint64_t>(16, max_bytes / 4096 / kShards));
  const uint64_t chunk = std::clamp<uint64_t>(
      std::bit_floor(std::max<uint64_t>(max_bytes / kShards / 8, 1)), 4096, BlockArena::kHugePage);
  const size_t slots = 2 * entries, counters = 4 * entries * kRows, hints = kShards * entries;
  const uint64_t table_bytes = kShards * slots * sizeof(Shard::Slot);
  const uint64_t counter_bytes = kShards * counters;
  // Every lookup starts at a random place in the tables and sketches: in huge pages that
  // costs a cache miss but no TLB miss (docs/notes/read-path.md).
  tables_ =
      MapAligned(table_bytes + counter_bytes + hints * sizeof(*hints_), BlockArena::kHugePage);
  if (tables_.empty()) return;  // not usable(): the pool goes without (a limit on memory)
  auto* all_slots = reinterpret_cast<Shard::Slot*>(tables_.data());
  std::uninitialized_value_construct_n(all_slots, kShards * slots);  // all empty
  uint8_t* all_counters = tables_.data() + table_bytes;              // zeroed by the kernel
  hints_ = reinterpret_cast<std::atomic<uint64_t>*>(all_counters + counter_bytes);
  VS_CHECK(reinterpret_cast<uintptr_t>(hints_) % alignof(std::atomic<uint64_t>) == 0);
  std::uninitialized_value_construct_n(hints_, hints);  // none yet
  hint_mask_ = hints - 1;
  slots_at_ = reinterpret_cast<uintptr_t>(all_slots);
  slot_bytes_ = sizeof(Shard::Slot);
  for (size_t i = 0; i < kShards; i++) {
    shards_.push_back(std::make_unique<Shard>(
        std::span<Shard::Slot>(all_slots + i * slots, slots),
        std::span<uint8_t>(all_counters + i * counters, counters), 10 * entries, chunk));
  }
  chunk_shift_ = std::countr_zero(chunk);
  region_shift_ =
      std::clamp(static_cast<int>(std::bit_width(max_bytes / kShards / 32)) - 1, 12, 19);
  fixed_bytes_ = tables_.size();
  bytes_ = fixed_bytes_;  // the sketches, tables and hints are charged to the bound too
}

BlockCache::~BlockCache() {
  if (reserve_thread_.joinable()) {
    reserve_thread_.request_stop();
    // Back to normal priority for the chunk it may be faulting in: at idle priority on a
    // busy machine that one chunk could keep the close waiting for seconds.
    sched_param param{};
    pthread_setschedparam(reserve_thread_.native_handle(), SCHED_OTHER, &param);
    reserve_thread_.join();
  }
  Clear();
  shards_.clear();
  Unmap(tables_);
}

uint64_t BlockCache::ShareOf(size_t shard) const {
  // Whole chunks: a shard is charged the chunks it maps, so a share of 7.6 chunks would
  // hold 7 and waste the rest. The chunks the bound allows are dealt out instead, the
  // first shards taking one more. (Shifts: this runs on every lookup.)
  const uint64_t chunks = capacity() >> chunk_shift_;
  return (chunks / kShards + (shard < chunks % kShards ? 1 : 0)) << chunk_shift_;
}

uint64_t BlockCache::capacity() const {
  const uint64_t other = other_bytes_ ? other_bytes_->load(std::memory_order_relaxed) : 0;
  const uint64_t used = other + fixed_bytes_;
  return used >= max_bytes_ ? 0 : max_bytes_ - used;
}

void BlockCache::ShrinkLocked(Shard& s, uint64_t cap) {
  // The indirect cache may have grown into this cache's share: give it back.
  while (s.bytes() > cap) {
    const uint64_t shed = s.Shed();
    if (shed == 0) break;
    bytes_ -= shed;
  }
}

bool BlockCache::Lookup(const BlockKey& key, uint8_t* dst, uint32_t in_off, uint32_t n,
                        bool count_access, uint64_t name) {
  const uint64_t h = HashKey(key);
  const size_t index = ShardIndex(key);
  Shard& s = *shards_[index];
  const uint64_t cap = ShareOf(index);
  // Both lines load while the lock is taken (a prefetch is not held back by its fence).
  __builtin_prefetch(&s.table[s.Slot0(h)]);
  if (count_access) __builtin_prefetch(&s.sketch[s.SketchBlock(h)], 1);
  const Shard::Slot::Packed packed = Shard::Slot::Pack(key);
  std::lock_guard l(s.mu);
  if (count_access) s.Record(h);
  ShrinkLocked(s, cap);
  Shard::Slot& slot = s.table[s.Find(packed, h)];
  if (slot.empty() || !packed.fits) {
    s.stats.misses++;
    return false;
  }
  VS_CHECK_OP(uint64_t{in_off} + n, <=, key.size);
  std::memcpy(dst, slot.data() + in_off, n);
  slot.set_ref(true);
  if (name != kUnnamed) NoteHint(name, slot.data(), &slot);
  s.stats.hits++;
  return true;
}

void BlockCache::NoteHint(uint64_t name, const uint8_t* data, const void* slot) {
  const uint64_t index = (reinterpret_cast<uintptr_t>(slot) - slots_at_) / sizeof(Shard::Slot);
  const uint64_t hint = PackHint(reinterpret_cast<uintptr_t>(data), index);
  if (hint == 0) return;
  // Written only when it changed: readers of one block on several CPUs share its line.
  std::atomic<uint64_t>& entry = hints_[name & hint_mask_];
  if (entry.load(std::memory_order_relaxed) != hint) entry.store(hint, std::memory_order_relaxed);
}

void BlockCache::Prefetch(const BlockKey& key, bool count_access) const {
  const uint64_t h = HashKey(key);
  const Shard& s = *shards_[ShardIndex(key)];
  __builtin_prefetch(&s.table[s.Slot0(h)]);
  if (count_access) __builtin_prefetch(&s.sketch[s.SketchBlock(h)], 1);  // Record writes it
}

void BlockCache::Reserve(std::stop_token stop) {
  // Idle priority: the faults run on a CPU nothing else wants. Advice only.
  sched_param param{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &param);
  for (;;) {
    bool grew = false;
    for (size_t i = 0; i < shards_.size(); i++) {
      if (stop.stop_requested()) return;
      Shard& s = *shards_[i];
      const uint64_t chunk = s.arena.chunk_bytes();
      const auto room = [&] { return s.bytes() + chunk <= ShareOf(i) && !s.arena.has_spare(); };
      {
        std::lock_guard l(s.mu);
        if (!room()) continue;
      }
      const std::span<uint8_t> memory = chunk_source_(chunk);
      if (memory.empty()) {
        reserving_ = false;  // no memory to be had: readers fault theirs in, or do without
        return;
      }
      std::lock_guard l(s.mu);
      if (!room()) {
        Unmap(memory);
        continue;
      }
      s.arena.AddSpare(memory);
      bytes_ += chunk;
      owed_since_ = 0;
      grew = true;
    }
    if (!grew) {
      owed_since_ = 0;  // every shard has its spare or is full
      std::unique_lock l(reserve_mu_);
      if (!reserve_cv_.wait(l, stop, [&] { return reserve_wanted_; })) return;
      reserve_wanted_ = false;
    }
  }
}

void BlockCache::WakeReserve() {
  int64_t none = 0;
  owed_since_.compare_exchange_strong(none, SteadyNanos());
  std::lock_guard l(reserve_mu_);
  reserve_wanted_ = true;
  reserve_cv_.notify_one();
}

bool BlockCache::ReaderMayFault() const {
  if (!reserving_.load(std::memory_order_relaxed)) return true;
  const int64_t since = owed_since_.load(std::memory_order_relaxed);
  return since != 0 && SteadyNanos() - since > std::chrono::nanoseconds(kReserveStall).count();
}

bool BlockCache::Insert(const BlockKey& key, const uint8_t* data, bool count_access, Offer offer) {
  if (reserve_) {
    std::call_once(reserve_started_, [this] {
      reserving_ = true;  // before the thread runs: it clears this if it ends for want of memory
      try {
        reserve_thread_ = std::jthread([this](std::stop_token stop) { Reserve(stop); });
      } catch (const std::system_error&) {
        reserving_ = false;  // no thread to be had: the cache grows on demand
      }
    });
  }
  const uint64_t h = HashKey(key);
  const size_t index = ShardIndex(key);
  Shard& s = *shards_[index];
  const uint64_t cap = ShareOf(index);
  const Shard::Slot::Packed packed = Shard::Slot::Pack(key);
  std::lock_guard l(s.mu);
  if (count_access) s.Record(h);
  ShrinkLocked(s, cap);  // before any early return: a spare may sit over the share
  if (!packed.fits) {
    s.stats.rejected++;
    return true;
  }
  if (!s.table[s.Find(packed, h)].empty()) return true;  // same key, same bytes
  uint8_t* reuse = nullptr;  // a victim's buffer of this size, taken out of the table
  auto release_reuse = [&] {
    const uint64_t before = s.bytes();
    s.arena.Free(reuse, key.size);
    reuse = nullptr;
    bytes_ -= before - s.bytes();
  };
  auto growth = [&] { return reuse != nullptr ? 0 : s.arena.GrowthFor(key.size); };
  // A reader that must not fault memory in leaves the block out where it would take a fresh
  // chunk, before evicting anything for room in the table.
  const bool may_fault = offer != Offer::kRead || ReaderMayFault();
  auto leave_unready = [&] {
    s.stats.unready++;
    WakeReserve();
    return false;
  };
  if (!may_fault && reuse == nullptr && s.arena.NeedsNewChunk(key.size) &&
      s.bytes() + growth() <= cap) {
    return leave_unready();
  }
  bool admitted = false;
  while ((s.bytes() + growth() > cap || 2 * (s.entries + 1) > s.table.size()) && s.entries > 0) {
    const size_t v = s.Victim();
    if (!admitted) {
      // TinyLFU: only something asked for more often than the victim may replace it.
      if (s.Freq(h) <= s.Freq(HashKey(s.table[v].key()))) {
        s.stats.rejected++;
        return true;
      }
      admitted = true;
    }
    if (reuse == nullptr && s.table[v].size() == key.size) {
      reuse = s.table[v].data();  // the usual case: one block out, one in, no memory moves
      bytes_ -= s.Remove(v, /*free_data=*/false);
    } else if (2 * (s.entries + 1) > s.table.size()) {
      bytes_ -= s.Remove(v);  // the table is full
    } else {
      // Memory: the shard holds blocks of other sizes only, or is over its share (the
      // indirect cache grew). A taken buffer would keep its chunk mapped: give it up first.
      if (reuse != nullptr) release_reuse();
      if (s.arena.InChunks(key.size) && !s.arena.has_spare() && s.bytes() <= cap) {
        // The sparsest chunk's memory serves this size as it is, without a fault.
        const uint64_t before = s.bytes();
        if (!s.EmptySparsestChunk()) s.Remove(v);
        bytes_ -= before - s.bytes();
      } else {
        bytes_ -= s.Shed();
      }
    }
  }
  if (s.bytes() + growth() > cap) {  // empty, and still too small (a block bigger than it)
    if (reuse != nullptr) release_reuse();
    s.stats.rejected++;
    return true;
  }
  if (!may_fault && reuse == nullptr && s.arena.NeedsNewChunk(key.size)) {
    return leave_unready();  // a shard over its share shed a chunk above: none to take
  }
  const uint64_t before = s.bytes();
  const bool had_spare = s.arena.has_spare();
  uint8_t* buf = reuse ? reuse : s.arena.Allocate(key.size);
  if (reserve_ && had_spare && !s.arena.has_spare()) WakeReserve();
  if (buf != nullptr && !Shard::Slot::Holdable(buf)) {  // past 48 bits: none on Linux today
    s.arena.Free(buf, key.size);
    bytes_ += s.bytes() - before;  // what the allocation mapped and kept (modulo 2^64)
    buf = nullptr;
  }
  if (buf == nullptr) {  // no memory to be had, or none a slot can hold: a cache can do without
    s.stats.rejected++;
    return true;
  }
  std::memcpy(buf, data, key.size);
  s.table[s.Find(packed, h)].Fill(packed, buf);
  s.entries++;
  bytes_ += s.bytes() - before;
  s.stats.inserted++;
  return true;
}

void BlockCache::Forget(const BlockKey& key) {
  const uint64_t h = HashKey(key);
  Shard& s = ShardFor(key);
  std::lock_guard l(s.mu);
  const Shard::Slot::Packed packed = Shard::Slot::Pack(key);
  if (!packed.fits) return;  // never cached; its packed form may name a held key
  const size_t i = s.Find(packed, h);
  if (!s.table[i].empty()) bytes_ -= s.Remove(i);
}

void BlockCache::Clear() {
  for (auto& sp : shards_) {
    Shard& s = *sp;
    std::lock_guard l(s.mu);
    const uint64_t before = s.bytes();
    for (size_t i = 0; i < s.table.size(); i++) {
      if (s.table[i].empty()) continue;
      s.arena.Free(s.table[i].data(), s.table[i].size());
      s.table[i].Clear();
      s.stats.evicted++;
    }
    s.entries = 0;
    s.arena.ReleaseSpare();
    bytes_ -= before - s.bytes();
  }
}

BlockCacheStats BlockCache::Stats() const {
  BlockCacheStats t;
  for (auto& sp : shards_) {
    std::lock_guard l(sp->mu);
    t.hits += sp->stats.hits;
    t.misses += sp->stats.misses;
    t.inserted += sp->stats.inserted;
    t.rejected += sp->stats.rejected;
    t.unready += sp->stats.unready;
    t.evicted += sp->stats.evicted;
    t.entries += sp->entries;
  }
  t.bytes = bytes();
  return t;
}

}  // namespace volstack::pool
