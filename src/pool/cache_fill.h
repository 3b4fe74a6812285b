// CacheFill: a committed txg's data blocks copied into the block cache on a thread of its
// own, after the blocks that txg freed are dropped from it.
//
// Why. Written data is what a reader asks for next (warm after write, as ZFS's ARC is), but
// caching it is worth no wait: a block left out is read from its vdev when asked for. So
// the copies start while the commit flushes, when the CPUs wait for the disk, and go on
// after it returns, until done or until the next commit starts its own fill (which asks
// this one to stop: the copies of a streaming writer never pile up). No commit waits for
// them. (They used to be stopped, and waited for, at the end of their commit: with the copy
// in flight often a fault of fresh cache memory, 2-4 ms for a huge page on this class of
// VM, every commit of a streaming writer waited that long, and most of each txg was left
// out of the cache; docs/bench.md, "Eighth round".) Dropping the freed blocks (Forget) is
// here too, and is never cut short: it gives their room to live blocks, and costs the
// commit no shard lock and probe per overwritten block.
//
// Invariant: the bytes a fill reads (the txg's syncing buffers) are neither freed nor
// reused until it is done. The commit hands them over (Adopt) instead of recycling them,
// and a later commit takes them back once done() (PoolImpl::ReapCacheFillsLocked: Finish);
// a failed commit, whose buffers stay in its volumes, destroys its fill, which stops and
// joins it.
//
// Threads: the fill's own thread runs the forgets and copies and touches nothing else;
// every method is called by the commit (PoolImpl::sync_mu held).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "pool/blkptr_format.h"
#include "pool/block_cache.h"
#include "pool/volume.h"

namespace volstack::pool {

class CacheFill {
 public:
  // A data block the commit wrote, and the bytes its checksum was computed from.
  using Block = std::pair<Dva, std::span<const uint8_t>>;

  // Drops `forget` from `cache`, then offers each block (born in `txg`): on a thread of its
  // own when the blocks are many, returning the running fill; else, or when no thread can
  // be had, here, to the end, returning nullptr.
  static std::unique_ptr<CacheFill> Start(BlockCache* cache, uint64_t txg,
                                          std::vector<BlockKey> forget, std::vector<Block> blocks);
  ~CacheFill();  // stops and joins
  CacheFill(const CacheFill&) = delete;
  CacheFill& operator=(const CacheFill&) = delete;

  // Asks the copies to end after the one in flight (the forgets still all run).
  void Stop() { thread_.request_stop(); }
  bool done() const { return done_.load(std::memory_order_acquire); }

  // Keeps a volume's syncing buffers (the bytes the blocks point into) until done().
  void Adopt(std::shared_ptr<Volume> vol, std::map<uint64_t, Volume::Buf> buffers) {
    adopted_.emplace_back(std::move(vol), std::move(buffers));
  }
  // Stops the copies, waits for the thread and returns the adopted buffers, for their
  // volumes to reuse (at once when done()).
  std::vector<std::pair<std::shared_ptr<Volume>, std::map<uint64_t, Volume::Buf>>> Finish();

 private:
  CacheFill(BlockCache* cache, uint64_t txg, std::vector<BlockKey> forget,
            std::vector<Block> blocks);
  void Run(std::stop_token stop);

  BlockCache* const cache_;
  const uint64_t txg_;
  const std::vector<BlockKey> forget_;
  const std::vector<Block> blocks_;
  std::atomic<bool> done_{false};
  std::vector<std::pair<std::shared_ptr<Volume>, std::map<uint64_t, Volume::Buf>>> adopted_;
  std::jthread thread_;  // last: started once the members it reads exist
};

}  // namespace volstack::pool
