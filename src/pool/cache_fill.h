// CacheFill: a committed txg's data blocks copied into the block cache on a thread of its
// own, after the blocks that txg freed are dropped from it.
//
// Why. Written data is what a reader asks for next (warm after write, as ZFS's ARC is), but
// caching it is worth no wait: a block left out is read back later (below). So
// the copies run while the commit flushes, when the CPUs wait for the disk, and the commit
// stops them once the txg is durable, without waiting for the copy in flight: while the
// cache grows that copy is often a fault of fresh cache memory, 2-4 ms for a huge page on
// this class of VM, and every commit of a streaming writer used to wait that long
// (docs/notes/read-path.md). Dropping the freed blocks (Forget) is here too, and is
// never cut short (it reads no buffer): it gives their room to live blocks, and costs the
// commit's tree update no shard lock and probe per overwritten block.
//
// The buffers. The copies read the txg's syncing buffers, which the commit gives back to
// their volume for the next writes. Stop() says which block's copy may still be in flight:
// copies go in order, each block claimed before the stop flag is read, so after Stop() no
// other block is read again. The commit keeps that one buffer with the fill (Keep), freed
// when the fill is destroyed, and gives the rest back at once; so a fill holds one block
// of data beyond the bound at most, and its lists (80 bytes a block, 24 a forget) until
// its thread ends. A failed commit, whose buffers stay in its volumes, destroys its fill,
// which stops and joins it.
//
// Left as it is: a fill stopped in the middle of copying block B, which the next commit
// frees, may insert B after the next fill has forgotten it. The entry is dead, never wrong
// (its key holds B's birth txg), and ages out as any other.
//
// What a stopped fill left out is handed to the pool's CacheRefill (cache_refill.h), which
// reads it back from the vdevs, verified, on a thread of its own; the blocks the txg freed
// are dropped from the refill's queue as from the cache.
//
// Threads: the fill's own thread runs the forgets and copies and hands the refill its
// forgets and what it left out, and touches nothing else; every method is called by one
// thread, the commit's (PoolImpl::sync_mu held). A txg of less than 1 MiB is copied on the
// commit's thread instead, before Start returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/block_cache.h"
#include "pool/cache_refill.h"
#include "pool/volume.h"

namespace volstack::pool {

class CacheFill {
 public:
  // A data block the commit wrote, and the bytes its checksum was computed from.
  struct Block {
    WrittenBlock block;
    std::span<const uint8_t> data;
  };

  // Drops `forget` from `cache` (and from `refill`'s queue), then offers each block: on a
  // thread of its own when the blocks are many, returning the running fill; else, or when
  // no thread can be had, here, to the end, returning nullptr. Blocks a Stop() leaves out
  // go to `refill` (nullptr: none).
  static std::unique_ptr<CacheFill> Start(BlockCache* cache, CacheRefill* refill,
                                          std::vector<BlockKey> forget, std::vector<Block> blocks);
  ~CacheFill();  // stops and joins
  CacheFill(const CacheFill&) = delete;
  CacheFill& operator=(const CacheFill&) = delete;

  // Stops the copies without waiting. Returns the bytes of the one block whose copy may
  // still be in flight (they must stay put until done()), or nullptr when none is.
  const uint8_t* Stop();
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Holds the buffer Stop() named until the fill is destroyed.
  void Keep(Volume::Buf buffer) { kept_ = std::move(buffer); }

 private:
  CacheFill(BlockCache* cache, CacheRefill* refill, std::vector<BlockKey> forget,
            std::vector<Block> blocks);
  void Run(bool threaded);

  BlockCache* const cache_;
  CacheRefill* const refill_;
  std::vector<BlockKey> forget_;  // the thread's, until it ends (and frees them)
  std::vector<Block> blocks_;
  // The protocol of Stop(), in the one total order of seq_cst operations: the thread
  // stores the bytes of the block it is about to copy, then reads stop_; Stop() stores
  // stop_, then reads claimed_. The thread copies only blocks it claimed before reading
  // stop_ false, in order, so one claimed later than Stop()'s read is never copied.
  std::atomic<const uint8_t*> claimed_{nullptr};
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  Volume::Buf kept_;
  std::thread thread_;  // joined by ~CacheFill
};

}  // namespace volstack::pool
