// CacheRefill: the blocks a commit wrote whose cache copies were cut short (cache_fill.h),
// read back from their vdevs, verified, and offered to the block cache on a thread of its
// own.
//
// Why. A commit stops its cache copies once its txg is durable, because its buffers go
// back to the writers. While the cache grows, each copy into a fresh chunk waits for the
// host to fault it in, so the copies of a large write fall behind and are cut short: on
// this class of VM pool_bench's SeqRead1M/0 found 84-97 % of the blocks it had just
// written in the cache, where 99.4 % fit, and each miss is a vdev read and a checksum
// inside the reader's call. Reading the missed blocks back here, off the readers' and the
// writers' threads, keeps the cache as warm after a write as the commits meant it to be
// (docs/notes/read-path.md).
//
// What it costs. One vdev read and one checksum per block left out. Copies are left out
// whenever a commit is durable before its fill gets to them: most of them while the cache
// grows, and some behind any fast writer (see "Writers first" below). The blocks are
// offered as a reader's miss is (Offer::kRead): one that would need fresh memory waits
// for the cache's reserve to fault it in, so no reader waits on a shard lock while the
// refill faults memory in. The queue holds at most `max_bytes` of blocks (the cache's
// bound) and kMaxQueued of them; beyond, new blocks are dropped, as a stopped fill drops
// them. An entry takes 112 bytes of heap, so a full queue takes 3.5 MiB, outside the
// cache's bound (within the pool's 64 MiB of slack), and only until the worker has read
// it back.
//
// Correctness. A block is offered only when the bytes read match the checksum its commit
// computed, so a block whose space was freed and written again meanwhile is skipped (not
// counted as a vdev error: it is not one). A commit's freed blocks leave the queue
// (Forget), the one in flight included, but a block can still be freed before it is read
// back: the fill of an earlier txg, finishing its last copy, may add it after the freeing
// txg's fill ran its forgets. Such a block goes in as a dead entry, which no one asks for
// and which ages out, as after a stopped fill (cache_fill.h).
//
// Writers first. The worker reads nothing while the pool holds data not yet committed
// (`busy`, checked every kBusyPoll): a streaming writer's commits cut their copies short
// most of the time, and reading every block back behind it would add a read to each of
// its writes on the vdevs. Once the writes are committed the queue is read back, less
// what they freed. (pool_bench SeqWrite64K's writer pauses between intervals while the
// reference runs; the refill reads back 8-23 thousand of its 16 KiB blocks a run in those
// pauses, as it did without this rule, 13-37 thousand.)
//
// Clear (close; tests) empties the queue and waits for an insert under way, but not for a
// vdev read: a read in flight at a Clear is not offered. A close therefore never waits on
// a slow device here; the destructor joins the worker, which may.
//
// Threads: Add, Forget and Clear are called by the commits and their fills, under the
// refill's mutex, which is taken after PoolImpl::sync_mu and never held while taking a
// block-cache lock; the worker, started by the first Add, reads and inserts one block at a
// time with no lock held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <span>
#include <thread>

#include "pool/blkptr_format.h"
#include "pool/block_cache.h"
#include "pool/checksum.h"
#include "util/status.h"

namespace volstack::pool {

// A block a commit wrote: where it lives and the checksum that vouches for its bytes.
struct WrittenBlock {
  BlockKey key;
  ChecksumType cksum = ChecksumType::kXxh3_128;
  Checksum checksum;
  // Stored compressed (compress.h): `stored` bytes (its asize) are read back, the checksum
  // verified on the first psize of them, and the logical bytes (key.size) decoded.
  Compression comp = Compression::kNone;
  uint32_t psize = 0;
  uint32_t stored = 0;
};

struct CacheRefillStats {
  uint64_t refilled = 0;    // read back, verified and offered to the cache
  uint64_t mismatched = 0;  // read back but no longer the block's bytes: skipped
  uint64_t failed = 0;      // the vdev read failed: skipped
  uint64_t dropped = 0;     // not queued (the queue was full), or dropped in flight (a
                            // Clear, a Forget, the destructor)
  uint64_t queued = 0;      // in the queue now
};

class CacheRefill {
 public:
  // Reads `dst.size()` bytes at `offset` of vdev `vdev`.
  using VdevRead = std::function<Status(uint32_t vdev, uint64_t offset, std::span<uint8_t> dst)>;
  // True while the pool holds data not yet committed.
  using Busy = std::function<bool()>;
  static constexpr size_t kMaxQueued = 32768;
  static constexpr std::chrono::milliseconds kBusyPoll{5};
  // Between offers of a block the cache left out while its reserve faults memory in.
  static constexpr std::chrono::milliseconds kRetryDelay{1};

  // `busy` may be empty: never busy.
  CacheRefill(BlockCache* cache, VdevRead read, uint64_t max_bytes, Busy busy = {});
  ~CacheRefill();  // stops and joins; blocks still queued are dropped
  CacheRefill(const CacheRefill&) = delete;
  CacheRefill& operator=(const CacheRefill&) = delete;

  void Add(std::span<const WrittenBlock> blocks);
  // The blocks a commit freed: no one will ask for them again.
  void Forget(std::span<const BlockKey> keys);
  // Drops the queue and the block whose read is in flight, and waits for an insert under
  // way (close; tests that look at the cache).
  void Clear();
  // Waits until the queue is empty and no block is in flight (tests).
  void WaitIdle();
  CacheRefillStats Stats() const;

 private:
  // Disk order: the worker reads a stream's blocks back in sequence. Transparent, so that
  // Forget finds a block by its key.
  struct DiskOrder {
    using is_transparent = void;
    static const BlockKey& KeyOf(const BlockKey& k) { return k; }
    static const BlockKey& KeyOf(const WrittenBlock& b) { return b.key; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return Less(KeyOf(a), KeyOf(b));
    }
    static bool Less(const BlockKey& a, const BlockKey& b);
  };
  void Run(std::stop_token stop);

  BlockCache* const cache_;
  const VdevRead read_;
  const uint64_t max_bytes_;
  const Busy busy_;
  mutable std::mutex mu_;
  std::condition_variable_any wake_;         // the worker: work or stop
  std::condition_variable idle_;             // Clear and WaitIdle
  std::set<WrittenBlock, DiskOrder> queue_;  // GUARDED_BY(mu_)
  uint64_t queued_bytes_ = 0;                // GUARDED_BY(mu_)
  bool in_flight_ = false;                   // GUARDED_BY(mu_): a block taken, not yet done
  bool inserting_ = false;                   // GUARDED_BY(mu_): its Insert is under way
  BlockKey in_flight_key_;                   // GUARDED_BY(mu_)
  bool in_flight_forgotten_ = false;         // GUARDED_BY(mu_): freed while in flight
  uint64_t clears_ = 0;                      // GUARDED_BY(mu_): a read older than one is dropped
  CacheRefillStats stats_;                   // GUARDED_BY(mu_)
  std::jthread worker_;                      // started by the first Add
};

}  // namespace volstack::pool
