// TxgStats: where the pool's txg commits spend their time, summed over every commit since
// the pool opened (ZFS keeps such times per txg, in its `txgs` kstat).
//
// Why. What a commit costs moves with the host more than with the code: on the VMs this
// project is measured on, the same build's SeqWrite64K/1 ratio read 0.69 at one hour and
// 0.84 at the next (docs/notes/commit-path.md). Timing each step in every commit, and
// pool_bench reporting the means per commit, lets one run say whether a slow ratio came
// from the pool's own work (the trees: checksums, the kernel's copies, the indirect blocks)
// or from the disk (the flushes), without patching timers in.
//
// The steps are txg_sync.cc's: trees (2-3, up to the block cache's fill starting), space
// maps (4: log headers' frees, space map, MOS), flush (5: the first flush, making the tree
// durable), uberblocks (5: written to every label and flushed), finish (6: frees released,
// the dirty buffers given back, logs dropped). A failed commit is not counted.
#pragma once

#include <chrono>
#include <cstdint>

namespace volstack::pool {

struct TxgStats {
  uint64_t commits = 0;
  uint64_t data_bytes = 0;   // data blocks written, allocated size
  uint64_t early_bytes = 0;  // of those, written early and adopted (early_write.cc)
  std::chrono::nanoseconds trees{0};
  std::chrono::nanoseconds space_maps{0};
  std::chrono::nanoseconds flush{0};
  std::chrono::nanoseconds uberblocks{0};
  std::chrono::nanoseconds finish{0};
};

}  // namespace volstack::pool
